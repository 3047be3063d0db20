"""A MiniCluster dispatched to a worker cluster by Kueue's MultiKueue, as the
manager sees it (pure): its resource, whose status MultiKueue copies back
from the worker's copy, and Kueue's Workload for it on the manager, which
names the worker that took it (``status.clusterName``) or says why none has.

MultiKueue copies the worker's last status back before it finishes the
manager's Workload, so a job counts as ended here once its resource says
Succeeded or Failed and either its Workload is finished or rank 0's output
(``status.output``, which the operator on the worker writes last) is there
and the Workload names the worker."""

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
    up: bool  # its brokers run on the worker (or its job already ended)
    ended: bool  # its job ended, and the worker's last status is here
    exit_code: int | None
    output: str  # the end of rank 0's output, as the worker's operator kept it
    failure: str | None  # why it failed, as the worker says

    def summary(self) -> str:
        """The progress line."""
        if self.cluster is None:
            return self.waiting
        where = "running on" if self.up else "dispatched to"
        return f"{where} worker cluster {self.cluster}: {self.brokers}"


def _true(cr: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (cr.get("status") or {}).get("conditions") or []
    )


def _latest(workloads: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    if not workloads:
        return None
    return max(workloads, key=lambda w: w.get("metadata", {}).get("creationTimestamp") or "")


def _failure(cr: dict[str, Any]) -> str | None:
    for condition in (cr.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return str(condition.get("message") or condition.get("reason") or "it failed")
    return None


def dispatch_of(cr: dict[str, Any], workloads: Sequence[dict[str, Any]], queue: str) -> Dispatch:
    """Resource ``cr`` and its Workloads (on queue ``queue``) read as a Dispatch."""
    status = cr.get("status") or {}
    workload = _latest(workloads)
    over = _true(cr, "Succeeded") or _true(cr, "Failed")
    held = workload is not None and (
        over
        or _true(workload, "Finished")
        or (_true(workload, "Admitted") and not _true(workload, "Evicted"))
    )
    cluster = (workload or {}).get("status", {}).get("clusterName") if held else None
    # the Workload's events come on a watch of their own: until one is here,
    # which worker ran it is not known, and the end waits for it
    # (a worker's status comes only after the Workload names that worker)
    last_status_here = workload is not None and (
        (bool(status.get("output")) and cluster is not None) or _true(workload, "Finished")
    )
    code = status.get("exitCode")
    if over and code is None and _true(cr, "Failed"):
        code = 1
    size = status.get("size", (cr.get("spec") or {}).get("size", 1))
    return Dispatch(
        cluster=str(cluster) if cluster else None,
        waiting=admission(queue, list(workloads)),
        brokers=f"{status.get('brokersUp', 0)}/{size} brokers up",
        up=over or _true(cr, "Ready") or _true(cr, "Running"),
        ended=over and last_status_here,
        exit_code=None if code is None else int(code),
        output=str(status.get("output") or ""),
        failure=_failure(cr),
    )
