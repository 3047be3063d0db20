"""What a MiniCluster resource reports, computed from its objects (pure):
the Flux Operator's own status fields (size, maximumSize, selector, jobid)
so tooling written for it keeps working, and what it never said - conditions
Ready (every broker pod running), Running (rank 0's command started),
Succeeded / Failed with the job's exit code and a one-line reason, the
brokers up, observedGeneration; and for a queued one, Admitted (Kueue's
reason and message: waiting for quota, preempted...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.render.targets import Target
from fluxhop.workload import Root
from fluxhop.workload.pod_problems import STUCK, pod_problem
from fluxhop.workload.status import completion_index, started, status_of

__all__ = ["OUTPUT_LINES", "Admission", "Problem", "output_tail", "resource_status"]


@dataclass(frozen=True)
class Problem:
    """Why the resource cannot be (fully) reconciled: a condition and a line."""

    condition: str  # Failed (bad spec) or SpecApplied (a change it cannot take)
    reason: str
    message: str


OUTPUT_LINES = 50  # status.output: the end of rank 0's log, at most this many lines
OUTPUT_BYTES = 4096  # and bytes: every watcher of the resource gets it on every change


def output_tail(lines: list[str]) -> str:
    """The end of rank 0's log as status.output keeps it: whole lines, the
    last ones that fit. A status travels with every watch event of its
    resource (and MultiKueue copies it across clusters): a tail, not a log."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines[-OUTPUT_LINES:]):
        line = line.rstrip("\n")
        size += len(line.encode()) + 1
        if size > OUTPUT_BYTES:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


@dataclass(frozen=True)
class Admission:
    """Kueue's answer for a queued resource: admitted or not, with Kueue's
    reason and message (operator/kueue.py reads it)."""

    admitted: bool
    reason: str
    message: str


def _condition(
    kind: str,
    value: bool,
    reason: str,
    message: str,
    generation: int,
    previous: dict[str, Any],
    now: str,
) -> dict[str, Any]:
    status = "True" if value else "False"
    before = previous.get(kind) or {}
    same = before.get("status") == status
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": before.get("lastTransitionTime", now) if same else now,
    }


def resource_status(
    cr: dict[str, Any],
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    *,
    max_size: int,
    now: str,
    problem: Problem | None = None,
    admission: Admission | None = None,
) -> dict[str, Any]:
    """The status of MiniCluster resource ``cr`` (``now``: RFC 3339)."""
    name = cr["metadata"]["name"]
    generation = int(cr["metadata"].get("generation", 1))
    previous = {c.get("type"): c for c in (cr.get("status") or {}).get("conditions") or []}
    size = int((job or {}).get("spec", {}).get("parallelism", cr.get("spec", {}).get("size", 1)))
    running = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
    code = None
    state = "Pending"
    if job is not None:
        root = Root(Target.JOB, job)
        from datetime import UTC, datetime

        summary = status_of(root, job, pods, datetime.now(UTC))
        state, code = summary.state, summary.exit_code
        lead_started = any(completion_index(p) == 0 and started(p, root.container) for p in pods)
    else:
        lead_started = False
    # what a node says keeps a pod from running, or killed a container
    stuck = next((found for p in pods if (found := pod_problem(p)) is not None), None)
    failed = state == "Failed" or (problem is not None and problem.condition == "Failed")
    if problem is not None and problem.condition == "Failed":
        failed_reason, failed_message = problem.reason, problem.message
    elif state == "Failed" and stuck is not None and stuck.reason == "OOMKilled":
        failed_reason, failed_message = stuck.reason, stuck.line()
    elif state == "Failed":
        failed_reason = "JobFailed"
        failed_message = f"rank 0 exited with code {code}" if code is not None else "the Job failed"
    else:
        failed_reason, failed_message = "NotFailed", ""
    conditions = [
        _condition(
            "Ready",
            running >= size > 0,
            "BrokersUp"
            if running >= size
            else (
                stuck.reason if stuck is not None and stuck.reason in STUCK else "BrokersStarting"
            ),
            f"{running}/{size} brokers up"
            + (f"; {stuck.line()}" if stuck is not None and stuck.reason in STUCK else ""),
            generation,
            previous,
            now,
        ),
        _condition(
            "Running",
            lead_started and state not in ("Succeeded", "Failed"),
            "CommandStarted" if lead_started else "Waiting",
            "rank 0's command started" if lead_started else "rank 0 has not started yet",
            generation,
            previous,
            now,
        ),
        _condition(
            "Succeeded",
            state == "Succeeded",
            "JobSucceeded" if state == "Succeeded" else "NotFinished",
            "rank 0 exited with code 0" if state == "Succeeded" else "",
            generation,
            previous,
            now,
        ),
        _condition("Failed", failed, failed_reason, failed_message, generation, previous, now),
    ]
    if admission is not None:  # a queued resource: Kueue's answer, in its words
        conditions.append(
            _condition(
                "Admitted",
                admission.admitted,
                admission.reason or "Pending",
                admission.message,
                generation,
                previous,
                now,
            )
        )
    if problem is not None and problem.condition == "SpecApplied":
        conditions.append(
            _condition(
                "SpecApplied", False, problem.reason, problem.message, generation, previous, now
            )
        )
    elif "SpecApplied" in previous:
        conditions.append(
            _condition(
                "SpecApplied", True, "Applied", "the spec is applied", generation, previous, now
            )
        )
    status: dict[str, Any] = {
        "conditions": conditions,
        "size": size,
        "maximumSize": max_size,
        "selector": f"{MINICLUSTER_LABEL}={name}",
        "jobid": (job or {}).get("metadata", {}).get("name", ""),
        "observedGeneration": generation,
        "brokersUp": running,
    }
    if code is not None:
        status["exitCode"] = code
    return status
