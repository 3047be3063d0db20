"""A node whose kubelet marks pods Running without starting anything.

For benchmarks of controllers at scale (bench/bench_operator_scale.py: a
thousand MiniClusters on one machine): what a controller sees of such a pod
is what it sees of a running one - bound by the scheduler, init containers
Completed, containers running and ready, phase Running - but no sandbox,
network, volume or process exists. A deleted pod's deletion is confirmed at
once (DELETE with grace period 0 and its UID as precondition), as the real
kubelet confirms one whose containers have stopped. No pod IP is given:
there is no network to give one from.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

from tests.realk8s.api import ApiError
from tests.realk8s.kubelet.status import Container, now, pod_status

if TYPE_CHECKING:
    from tests.realk8s.kubelet.node import Kubelet

__all__ = ["mark", "running_status"]


def running_status(pod: dict[str, Any], host_ip: str) -> dict[str, Any]:
    """The status of ``pod`` with every init container Completed and every
    container running (pure)."""
    stamp = now()
    containers = [
        Container(c["name"], c.get("image", ""), init=True, state="terminated",
                  reason="Completed", started_at=stamp, finished_at=stamp)
        for c in pod["spec"].get("initContainers") or []
    ]  # fmt: skip
    containers += [
        Container(c["name"], c.get("image", ""), state="running", reason="", started_at=stamp)
        for c in pod["spec"].get("containers") or []
    ]
    return pod_status(
        pod, containers, pod_ip="", host_ip=host_ip, start_time=stamp, sandbox_ready=True
    )


def mark(kubelet: Kubelet, kind: str, pod: dict[str, Any]) -> None:
    """What the marking kubelet does with one watch event of its pods."""
    meta = pod["metadata"]
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
    try:
        if kind == "DELETED":
            return
        if meta.get("deletionTimestamp"):
            with contextlib.suppress(ApiError):  # already gone
                kubelet.api.delete(
                    path, {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
                )
            return
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            return
        kubelet.api.patch(f"{path}/status", {"status": running_status(pod, kubelet.host_ip)})
    except Exception as error:  # the watch goes on; the pod's next event tries again
        print(f"kubelet {kubelet.node}: marking {meta['name']}: {error}", file=sys.stderr,
              flush=True)  # fmt: skip
