"""A node whose pods read as running while nothing runs: kwok's.

For benchmarks of controllers at scale (bench/bench_operator_scale.py: a
thousand MiniClusters on one machine), the way Kubernetes' own scalability
work does it: kwok (sigs.k8s.io/kwok, built from its Go module) keeps the
Node Ready with Lease heartbeats and plays its pods' lifecycle with the
Stages its own clusters start with (``go/kwok/stages``): a bound pod turns
Running with its init containers Completed and its containers running and
ready; a deleted one is removed at once. What a controller sees of such a
pod is what it sees of a running one, but no sandbox, network, volume or
process exists.

kwok registers no Node: the test creates it, with kwok's annotation, and
kwok manages that one node.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.realk8s.api import Api
from tests.realk8s.processes import Process

__all__ = ["ANNOTATION", "POD_CIDR", "node_object", "start"]

ANNOTATION = "kwok.x-k8s.io/node"
# Its pods' addresses: in the benchmarking range with the rest of the
# cluster, apart from every node's pod range. Status only: nothing routes them.
POD_CIDR = "198.19.192.0/18"
LEASE_SECONDS = 8  # renewed every 2 s: well inside the node-lifecycle controller's grace


def node_object(name: str, address: str, labels: dict[str, str], taints: list[dict[str, str]],
                capacity: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """The Node kwok manages (pure): kwok's Stages fill in the rest of its
    status (without a capacity, kwok's: 1k CPUs, 1Ti, a million pods)."""
    resources = {"capacity": capacity, "allocatable": capacity} if capacity else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **labels,
            },
        },
        "spec": {"taints": taints},
        "status": {"addresses": [{"type": "InternalIP", "address": address}], **resources},
    }


def start(
    api: Api, kubeconfig: Path, bin_dir: Path, workdir: Path, node: dict[str, Any]
) -> Process:
    """Create ``node`` and start the kwok that manages it, with ``kubeconfig``."""
    name = node["metadata"]["name"]
    stages = workdir / f"kwok-{name}-stages.yaml"
    stages.write_bytes(
        subprocess.run([str(bin_dir / "kwok-stages")], capture_output=True, check=True).stdout
    )
    api.create("/api/v1/nodes", node)
    address = node["status"]["addresses"][0]["address"]
    process = Process(
        f"kwok-{name}",
        [
            str(bin_dir / "kwok"),
            f"--kubeconfig={kubeconfig}",
            f"--config={stages}",
            f"--manage-single-node={name}",
            f"--node-ip={address}",
            f"--cidr={POD_CIDR}",
            f"--node-lease-duration-seconds={LEASE_SECONDS}",
        ],
        workdir,
    )
    return process.start()
