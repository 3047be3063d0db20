"""A pod's status, computed as the kubelet computes it (pure).

The kubelet keeps a ``Container`` per container from what the pod sandbox
reports; ``pod_status`` turns them into the ``status`` it patches: the phase
by the kubelet's rules (``getPhase``), the conditions it owns
(PodReadyToStartContainers, Initialized, ContainersReady, Ready) with their
transition times, and the (init) container statuses. Conditions that others
own (PodScheduled from the scheduler, DisruptionTarget from an eviction) are
left alone: the status is sent as a strategic merge patch, which merges
conditions by type.

A started container is ready, unless it has a readinessProbe: then once
the probe passes (``probes.py`` runs exec readiness probes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Container", "now", "pod_status"]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Container:
    """What the kubelet knows of one container."""

    name: str
    image: str
    init: bool = False
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    container_id: str = ""
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    signal: int = 0
    restart_count: int = 0
    last_state: dict[str, Any] = field(default_factory=dict)
    probed: bool = False  # it has a readinessProbe: ready only once that passes
    probe_ready: bool = False

    @property
    def succeeded(self) -> bool:
        return self.state == "terminated" and self.exit_code == 0

    @property
    def ready(self) -> bool:
        return self.state == "running" and (self.probe_ready or not self.probed)

    def api(self) -> dict[str, Any]:
        if self.state == "running":
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            ended = {
                "exitCode": self.exit_code,
                "reason": self.reason,
                "startedAt": self.started_at or None,
                "finishedAt": self.finished_at,
                "containerID": self.container_id or None,
            }
            if self.signal:
                ended["signal"] = self.signal
            if self.message:
                ended["message"] = self.message
            state = {"terminated": {k: v for k, v in ended.items() if v is not None}}
        else:
            waiting = {"reason": self.reason}
            if self.message:
                waiting["message"] = self.message
            state = {"waiting": waiting}
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.ready,
            "started": self.state == "running",
            "restartCount": self.restart_count,
            "state": state,
            "lastState": self.last_state,
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out


def _phase(pod: dict[str, Any], init: list[Container], main: list[Container]) -> str:
    """The kubelet's getPhase for restartPolicy Never, OnFailure and Always."""
    policy = pod["spec"].get("restartPolicy", "Always")
    for container in init:
        if container.state == "terminated" and container.exit_code != 0 and policy == "Never":
            return "Failed"
        if not container.succeeded:
            return "Pending"
    running = sum(c.state == "running" for c in main)
    waiting = sum(c.state == "waiting" and c.restart_count == 0 for c in main)
    failed = sum(c.state == "terminated" and c.exit_code != 0 for c in main)
    stopped = sum(c.state == "terminated" for c in main)
    if waiting:
        return "Pending" if not running and not stopped else "Running"
    if running:
        return "Running"
    if stopped == len(main):
        if policy == "Always" or (failed and policy == "OnFailure"):
            return "Running"  # they are being restarted
        return "Failed" if failed else "Succeeded"
    return "Running"  # restarting after a back-off


def _condition(
    kind: str, true: bool, previous: dict[str, dict[str, Any]], reason: str = ""
) -> dict[str, Any]:
    status = "True" if true else "False"
    old = previous.get(kind)
    changed = old is None or old.get("status") != status
    condition = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": now() if changed else old["lastTransitionTime"],
    }
    # null removes a reason left from before: the status is a strategic merge patch
    condition["reason"] = reason if reason and not true else None
    return condition


def pod_status(
    pod: dict[str, Any],
    containers: list[Container],
    *,
    pod_ip: str,
    host_ip: str,
    start_time: str,
    sandbox_ready: bool,
) -> dict[str, Any]:
    """The status the kubelet patches, given the containers as they are now."""
    init = [c for c in containers if c.init]
    main = [c for c in containers if not c.init]
    phase = _phase(pod, init, main)
    terminal = phase in ("Succeeded", "Failed")
    previous = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    initialized = all(c.succeeded for c in init)
    ready = not terminal and bool(main) and all(c.ready for c in main)
    not_ready = "PodCompleted" if terminal else "ContainersNotReady"
    conditions = [
        _condition("PodReadyToStartContainers", sandbox_ready and not terminal, previous),
        _condition("Initialized", initialized, previous, "ContainersNotInitialized"),
        _condition("ContainersReady", ready, previous, not_ready),
        _condition("Ready", ready, previous, not_ready),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": [c.api() for c in main],
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if init:
        status["initContainerStatuses"] = [c.api() for c in init]
    return status
