"""``python -m tests.realk8s.kubelet CONFIG.json``: one node's kubelet.

CONFIG holds the fields of ``tests.realk8s.kubelet.node.NodeConfig``; the
test cluster writes it. Needs root (network namespaces, mounts)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.realk8s.kubelet.node import Kubelet, NodeConfig

PATHS = ("ca", "cert", "key", "serving_cert", "serving_key", "server_binary", "root", "flux_prefix")


def main() -> int:
    with open(sys.argv[1]) as f:
        fields = json.load(f)
    for key in PATHS:
        if fields.get(key) is not None:
            fields[key] = Path(fields[key])
    Kubelet(NodeConfig(**fields)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
