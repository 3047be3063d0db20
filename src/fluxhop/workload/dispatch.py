"""A MiniCluster dispatched to a worker cluster by Kueue's MultiKueue, as the
manager sees it (pure): its resource, whose status MultiKueue copies back
from the worker's copy, and Kueue's Workload for it on the manager, which
names the worker that took it (``status.clusterName``) or says why none has.

MultiKueue copies the worker's last status back before it finishes the
manager's Workload, so a job counts as ended here once its resource says
Succeeded or Failed and either its Workload is finished or rank 0's output
(``status.output``, which the operator on the worker writes last) is there
and the Workload names the worker. Kueue may also end it first: a Workload
finished without the job's end (the worker could not start it), a check that
rejected it, or a Workload deactivated."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fluxhop.workload.status import admission

__all__ = ["Dispatch", "dispatch_of"]


@dataclass(frozen=True)
class Dispatch:
    """Where a dispatched MiniCluster is and how far it has come."""

    cluster: str | None  # the worker cluster that took it, None while none has
    waiting: str  # what it waits for while no worker has it, in Kueue's words
    brokers: str  # "1/2 brokers up", as the worker's status says
    up: bool  # its brokers run on the worker
    over: bool  # the worker says its job ended (its last status may be on its way)
    ended: bool  # its job ended (or Kueue ended it), and the last status is here
    exit_code: int | None
    output: str  # the end of rank 0's output, as the worker's operator kept it
    failure: str | None  # why it failed, as the worker (or Kueue) says

    def summary(self) -> str:
        """The progress line."""
        if self.cluster is None:
            return self.waiting
        where = "running on" if self.up else "dispatched to"
        return f"{where} worker cluster {self.cluster}: {self.brokers}"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """``obj``'s condition of type ``kind`` when it is True."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return dict(condition)
    return None


def _said(condition: dict[str, Any]) -> str:
    return " ".join(str(condition.get("message") or condition.get("reason") or "").split())


def _latest(workloads: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    if not workloads:
        return None
    return max(workloads, key=lambda w: w.get("metadata", {}).get("creationTimestamp") or "")


def _refused(workload: dict[str, Any]) -> str | None:
    """Why Kueue will never run it (MultiKueue rejected it, or it was
    deactivated), or None."""
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        if check.get("state") == "Rejected":
            return f"admission check {check.get('name')} rejected it: {_said(check)}"
    if (workload.get("spec") or {}).get("active") is False:
        evicted = _condition(workload, "Evicted")
        return "Kueue deactivated its Workload" + (f": {_said(evicted)}" if evicted else "")
    return None


def _ended_by_kueue(workload: dict[str, Any]) -> tuple[int, str | None] | None:
    """(exit code, why) when Kueue ended the Workload before the job's own end
    reached this cluster: finished (e.g. FailedToStart on the worker), rejected
    or deactivated; None otherwise."""
    refused = _refused(workload)
    if refused:
        return 1, refused
    finished = _condition(workload, "Finished")
    if finished is None:
        return None
    if finished.get("reason") == "Succeeded":
        return 0, None
    return 1, f"its Workload finished: {_said(finished)}"


def dispatch_of(cr: dict[str, Any], workloads: Sequence[dict[str, Any]], queue: str) -> Dispatch:
    """Resource ``cr`` and its Workloads (on queue ``queue``) read as a Dispatch."""
    status = cr.get("status") or {}
    workload = _latest(workloads)
    failed = _condition(cr, "Failed")
    over = failed is not None or _condition(cr, "Succeeded") is not None
    held = workload is not None and (
        over
        or _condition(workload, "Finished") is not None
        or (_condition(workload, "Admitted") is not None and not _condition(workload, "Evicted"))
    )
    cluster = (workload or {}).get("status", {}).get("clusterName") if held else None
    code = status.get("exitCode")
    if failed is not None and not code:
        code = 1  # failed, with no code of rank 0's (or 0: another rank failed it)
    # Its last status is here once the worker's operator wrote rank 0's
    # output, or there is none to write (no exit code: it failed before
    # rank 0 ran), or the Workload is finished (MultiKueue copies the last
    # status first). The Workload comes on a watch of its own: until it names
    # the worker, the end waits for it.
    last_status_here = cluster is not None and (
        bool(status.get("output")) or status.get("exitCode") is None
    )
    by_kueue = _ended_by_kueue(workload) if workload is not None else None
    failure = _said(failed) if failed is not None else None
    if by_kueue is not None and not over:
        code, failure = by_kueue
    size = status.get("size", (cr.get("spec") or {}).get("size", 1))
    return Dispatch(
        cluster=str(cluster) if cluster else None,
        waiting=admission(queue, list(workloads)),
        brokers=f"{status.get('brokersUp', 0)}/{size} brokers up",
        up=not over and (_condition(cr, "Ready") or _condition(cr, "Running")) is not None,
        over=over,
        ended=(over and last_status_here) or by_kueue is not None,
        exit_code=None if code is None else int(code),
        output=str(status.get("output") or ""),
        failure=failure or None,
    )
