"""A MiniCluster's progress and state, read from its objects (pure: the
objects come in, nothing is fetched here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fluxhop.render.targets import Target
from fluxhop.workload.marks import COMPLETION_INDEX
from fluxhop.workload.pod_problems import pod_problem
from fluxhop.workload.root import Root

__all__ = [
    "Progress",
    "Status",
    "admission",
    "completed",
    "completion_index",
    "conditions",
    "disrupted",
    "disruption",
    "ended_resize_problem",
    "exit_code",
    "failed",
    "job_state",
    "running_lead",
    "started",
    "status_of",
    "stopping",
]


@dataclass
class Progress:
    """How far a MiniCluster has come up; ``admission`` says what it waits
    for while its queue has not admitted it (None once admitted)."""

    size: int
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    admission: str | None = None

    def count(self, phase: str) -> int:
        return sum(1 for pod in self.pods.values() if pod.get("status", {}).get("phase") == phase)

    @property
    def scheduled(self) -> int:
        return sum(
            1 for pod in self.pods.values() if pod.get("spec", {}).get("nodeName") or scheduled(pod)
        )

    @property
    def running(self) -> int:
        return sum(
            1
            for pod in self.pods.values()
            if pod.get("status", {}).get("phase") == "Running" and not stopping(pod)
        )

    @property
    def stopping(self) -> int:
        return sum(1 for pod in self.pods.values() if stopping(pod))

    @property
    def finished(self) -> int:
        return self.count("Succeeded") + self.count("Failed")

    def summary(self) -> str:
        if self.admission is not None:
            return self.admission
        return (
            f"{self.scheduled}/{self.size} pods scheduled, {self.running} running"
            + (f", {self.stopping} stopping" if self.stopping else "")
            + (f", {self.finished} finished" if self.finished else "")
        )


def admission(queue: str, workloads: list[dict[str, Any]]) -> str:
    """What a queued MiniCluster waits for, from Kueue's Workload for it:
    "waiting for admission by queue Q", with the reason Kueue gives (e.g.
    "couldn't assign flavors to pod set main: insufficient quota for cpu")."""
    waiting = f"waiting for admission by queue {queue}"
    if not workloads:
        return waiting
    latest = max(workloads, key=lambda w: w.get("metadata", {}).get("creationTimestamp") or "")
    found = {c.get("type"): c for c in latest.get("status", {}).get("conditions") or []}
    for kind in ("Evicted", "QuotaReserved", "Admitted"):
        condition = found.get(kind)
        wants = "True" if kind == "Evicted" else "False"
        if condition and condition.get("status") == wants and condition.get("message"):
            return f"{waiting}: {' '.join(str(condition['message']).split())}"
    if found.get("QuotaReserved", {}).get("status") == "True":
        checks = [
            f"{check.get('name')} {check.get('state') or 'Pending'}"
            + (f": {' '.join(str(check['message']).split())}" if check.get("message") else "")
            for check in latest.get("status", {}).get("admissionChecks") or []
            if check.get("state") != "Ready"
        ]
        return f"{waiting}: quota reserved, waiting for admission checks" + (
            f" ({'; '.join(checks)})" if checks else ""
        )
    return waiting


def scheduled(pod: dict[str, Any]) -> bool:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return True
    return False


def completion_index(pod: dict[str, Any]) -> int | None:
    value = (pod.get("metadata", {}).get("labels") or {}).get(COMPLETION_INDEX)
    return int(value) if value is not None and str(value).isdigit() else None


def running_lead(pods: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Rank 0's running pod (the newest, after a replacement), or None."""
    leads = [
        p
        for p in pods
        if completion_index(p) == 0
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]
    leads.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return leads[-1] if leads else None


def exit_code(pod: dict[str, Any], container: str) -> int | None:
    """The exit code of ``container`` once it has terminated."""
    for status in pod.get("status", {}).get("containerStatuses") or []:
        if status.get("name") == container:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated is not None:
                return int(terminated.get("exitCode", 1))
    return None


def disrupted(pod: dict[str, Any]) -> bool:
    """Ended by a disruption (eviction, preemption, a node drain): the pod
    condition DisruptionTarget, which the Job's podFailurePolicy ignores, so
    the Job controller replaces the pod and its exit code ends nothing."""
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or []
    )


def ignored_exits(workload: dict[str, Any]) -> set[int]:
    """Exit codes the workload's podFailurePolicy ignores (spec.leadState:
    143, a pod stopped by SIGTERM): the Job makes such a pod again, so its
    exit ends nothing. A JobSet's are in its replicated job's template."""
    spec = workload.get("spec") or {}
    jobs = [
        spec,
        *((r.get("template") or {}).get("spec") or {} for r in spec.get("replicatedJobs") or []),
    ]
    codes: set[int] = set()
    for job in jobs:
        for rule in (job.get("podFailurePolicy") or {}).get("rules") or []:
            exits = rule.get("onExitCodes") or {}
            if rule.get("action") == "Ignore" and exits.get("operator") == "In":
                codes.update(int(v) for v in exits.get("values") or [])
    return codes


def stopping(pod: dict[str, Any]) -> bool:
    """Deleted, and not yet ended: kubectl's Terminating."""
    phase = pod.get("status", {}).get("phase")
    return bool(pod.get("metadata", {}).get("deletionTimestamp")) and phase not in (
        "Succeeded",
        "Failed",
    )


# What ended a pod, by the reason of its DisruptionTarget condition (the
# reasons Kubernetes sets: pkg/apis/core/types.go, DisruptionTarget).
_DISRUPTIONS = {
    "EvictionByEvictionAPI": "it was evicted (a node drain, or kubectl evict)",
    "PreemptionByScheduler": "the scheduler preempted it for a pod of higher priority",
    "DeletionByPodGC": "the pod garbage collector deleted it (its node is gone)",
    "TerminationByKubelet": "its node's kubelet stopped it (node pressure or shutdown)",
}


def disruption(pod: dict[str, Any]) -> str:
    """Why a disrupted pod ended, in words; for a node that stopped answering,
    what brings the replacement: the Job replaces a pod only once it is gone,
    and the pods of a node whose kubelet is gone stay Terminating until the
    node is back or deleted."""
    found: dict[str, Any] = next(
        (
            c
            for c in pod.get("status", {}).get("conditions") or []
            if c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        ),
        {},
    )
    reason = found.get("reason", "")
    if reason == "DeletionByTaintManager":
        node = pod.get("spec", {}).get("nodeName") or "its node"
        return (
            f"its node {node} stopped answering and its pods are evicted; the Job replaces "
            f"them once they are gone: when the node is back, or deleted (kubectl delete node {node})"
        )
    return _DISRUPTIONS.get(reason) or str(found.get("message") or "it was disrupted")


def started(pod: dict[str, Any], container: str) -> bool:
    if pod.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"):
        return True
    return exit_code(pod, container) is not None


def ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition. On rank 0 of fluxhop's pods it says the
    instance is up: its readinessProbe passes once the broker is in the run
    state, every broker of the quorum joined (render/templates/ready.sh)."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


@dataclass(frozen=True)
class Status:
    name: str
    target: Target | str
    size: int
    max_size: int
    state: str
    age: float
    pods: dict[str, int]
    exit_code: int | None = None
    # what its nodes say keeps a pod from running, or ended a container
    # (workload/pod_problems.py), one line each
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": str(self.target),
            "size": self.size,
            "maxSize": self.max_size,
            "state": self.state,
            "ageSeconds": round(self.age),
            "pods": self.pods,
            "exitCode": self.exit_code,
            "problems": list(self.problems),
        }


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {
        c.get("type", ""): c.get("status", "")
        for c in obj.get("status", {}).get("conditions") or []
    }


def failed(obj: dict[str, Any]) -> bool:
    """The workload has failed, or is failing: the Job controller sets
    FailureTarget first, stops the pods, and only then Failed."""
    done = conditions(obj)
    return "True" in (done.get("Failed"), done.get("FailureTarget"))


def completed(obj: dict[str, Any]) -> bool:
    """The workload has succeeded, or is finishing so (SuccessCriteriaMet comes
    before Complete, once the other pods are stopped); JobSet says Completed."""
    done = conditions(obj)
    return "True" in (done.get("Complete"), done.get("Completed"), done.get("SuccessCriteriaMet"))


def ended_resize_problem(name: str, state: str | None) -> str | None:
    """Why a MiniCluster whose job has ended (``state`` Succeeded or Failed)
    cannot be resized, or None. Kubernetes takes a new size on a finished
    Job and starts nothing (its controller no longer looks at it), so the
    change would be accepted and do nothing: say so instead."""
    if state not in ("Succeeded", "Failed"):
        return None
    return (
        f"MiniCluster {name} has {state.lower()}: its instance has ended and its Job starts "
        "no more pods, so a new size would change nothing; create it again to run more"
    )


def job_state(job: dict[str, Any]) -> str | None:
    """Succeeded or Failed once the Job has ended (or is ending so), else None."""
    if failed(job):
        return "Failed"
    return "Succeeded" if completed(job) else None


def status_of(
    root: Root, workload: dict[str, Any], pods: list[dict[str, Any]], now: datetime
) -> Status:
    """A MiniCluster's state from its root, the object whose conditions tell
    how the job ended (``workload``), and its pods."""
    phases: dict[str, int] = {}
    for pod in pods:
        phase = "Terminating" if stopping(pod) else pod.get("status", {}).get("phase", "Unknown")
        phases[phase] = phases.get(phase, 0) + 1
    done = conditions(workload)
    # a disrupted rank 0, or one whose exit the podFailurePolicy ignores,
    # ends nothing: the Job replaces it
    ignored = ignored_exits(workload)
    leads = [p for p in pods if completion_index(p) == 0 and not disrupted(p)]
    leads = [p for p in leads if exit_code(p, root.container) not in ignored]
    lead = leads[0] if leads else None
    code = exit_code(lead, root.container) if lead else None
    if code is None and root.dispatched:  # run on another cluster: its status says
        code = (workload.get("status") or {}).get("exitCode")
    if failed(workload) or (code is not None and code != 0):
        state = "Failed"
    elif completed(workload) or code == 0:
        state = "Succeeded"
    elif root.queue and root.suspended:
        state = "Queued"
    elif done.get("Suspended") == "True" or root.suspended:
        state = "Suspended"
    elif phases.get("Running", 0) >= root.size > 0:
        state = "Running"
    elif root.dispatched and done.get("Ready") == "True":
        state = "Running"  # elsewhere, as the status copied back says
    elif any(disrupted(p) and stopping(p) for p in pods):
        state = "Disrupted"  # pods evicted or preempted, not yet gone: the Job then replaces them
    else:
        state = "Pending"
    created = root.created
    age = (now - created).total_seconds() if created else 0.0
    problems = tuple(
        problem.line()
        for pod in sorted(pods, key=lambda p: p.get("metadata", {}).get("name", ""))
        if (problem := pod_problem(pod)) is not None
    )
    return Status(
        root.name, root.target, root.size, root.max_size, state, age, phases, code, problems
    )
