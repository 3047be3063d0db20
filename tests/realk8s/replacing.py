"""What the health-replace test and its benchmark read and undo on the real
cluster: a rank's running pod, and the taints fluxhop's operator left."""

from __future__ import annotations

from typing import Any

from fluxhop.operator.health_watch import UNHEALTHY
from tests.realk8s.api import Api
from tests.realk8s.outcomes import KINDS

__all__ = ["lift_unhealthy_taints", "running_pod"]


def running_pod(api: Api, namespace: str, name: str, rank: int) -> dict[str, Any] | None:
    """MiniCluster ``name``'s running pod of ``rank`` (not one going away), or None."""
    pods = api.get(KINDS["Pod"].format(namespace), labelSelector=f"job-name={name}")
    for pod in pods["items"]:
        labels = pod["metadata"].get("labels") or {}
        if (labels.get("batch.kubernetes.io/job-completion-index") == str(rank)
                and pod["status"].get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp")):  # fmt: skip
            return pod
    return None


def lift_unhealthy_taints(api: Api) -> None:
    """Every taint of health's replace, off every node, as an admin would
    once the node is fixed (the test cluster is shared by the tests after)."""
    for node in api.get("/api/v1/nodes")["items"]:
        taints = node["spec"].get("taints") or []
        kept = [t for t in taints if t.get("key") != UNHEALTHY]
        if kept != taints:
            api.patch(f"/api/v1/nodes/{node['metadata']['name']}",
                      {"spec": {"taints": kept or None}}, kind="merge")  # fmt: skip
