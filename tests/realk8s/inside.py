"""Flux inside a MiniCluster resource's rank 0 on the test cluster, whichever
operator made its pods: ``kubectl exec`` with the prelude fluxhop's own
verbs use (fluxhop.workload.inside: fluxhop's env.sh, or the Flux
Operator's flux-view.sh and socket)."""

from __future__ import annotations

import subprocess
from typing import Any

from fluxhop.render.targets import Target
from fluxhop.workload.inside import in_pod
from fluxhop.workload.root import Root
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.outcomes import MINICLUSTERS, rank0
from tests.realk8s.tools import kubectl


def flux(cluster: LocalCluster, admin: Api, namespace: str, name: str,
         *args: str) -> subprocess.CompletedProcess[str] | None:  # fmt: skip
    """``flux ARGS`` in rank 0 of MiniCluster ``name`` (None: no rank 0 running)."""
    pod = rank0(admin, namespace, name)
    if pod is None or pod.get("status", {}).get("phase") != "Running":
        return None
    resource: dict[str, Any] = admin.get(f"{MINICLUSTERS.format(namespace)}/{name}")
    root = Root(Target.MINICLUSTER, resource)
    argv = in_pod(root.flux_root if root.fluxhop_pods else None, list(args))
    return kubectl(cluster, "exec", "-n", namespace, pod["metadata"]["name"],
                   "-c", pod["spec"]["containers"][0]["name"], "--", *argv, check=False)  # fmt: skip


def online(cluster: LocalCluster, admin: Api, namespace: str, name: str) -> int:
    """Brokers online, as rank 0's instance says (0 while it cannot say)."""
    done = flux(cluster, admin, namespace, name, "resource", "status", "-s", "online", "-no",
                "{nnodes}")  # fmt: skip
    words = done.stdout.split() if done is not None and done.returncode == 0 else []
    return int(words[0]) if words and words[0].isdigit() else 0
