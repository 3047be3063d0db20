"""Following a MiniCluster that runs on another cluster (``spec.managedBy``,
Kueue's MultiKueue) from the cluster it was created on: no pod of it is
here, so the watch is of its resource, whose status MultiKueue copies back
from the worker, and of Kueue's Workload for it, which says which worker
took it, or why none has yet (workload/dispatch.py reads the two)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fluxhop.cluster.podwatch import PodWatch
from fluxhop.cluster.watchstop import WatchStop
from fluxhop.errors import WaitTimeout
from fluxhop.workload.dispatch import Dispatch, dispatch_of
from fluxhop.workload.root import Root
from fluxhop.workload.status import Progress

__all__ = ["DispatchWait"]

LAST_STATUS_WAIT = 60.0  # seconds for rank 0's output to follow the end of its job


class DispatchWait(PodWatch):
    """The wait of ``MiniClusters`` for a dispatched MiniCluster."""

    def follow_dispatched(
        self,
        root: Root,
        *,
        until_up: bool = False,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> Dispatch:
        """Until the job of dispatched ``root`` has ended and its last status
        is back (``until_up``: until its brokers run on the worker). The
        ``timeout`` bounds the wait for its brokers to run, as for rank 0 to
        start here; ``on_note`` hears which worker took it, and when a worker
        gives it back (preempted there, or the worker lost) to be queued again."""
        clock = _Deadlines(self.clock, timeout)
        stop = WatchStop()  # set when the wait is over: its watches end at once
        queue_name = root.queue or ""
        state = dispatch_of(root.obj, [], queue_name)
        stale: str | None = None  # the resource's version whose status a worker gave back
        try:
            changes = self._root_changes(root, lambda: clock.remaining(state), stop,
                                         lambda: state.summary())  # fmt: skip
            for now, workloads in changes:
                cr = now.obj
                if cr["metadata"].get("resourceVersion") == stale:
                    cr = {**cr, "status": {}}  # that worker's, not news of the next one
                was, state = state, dispatch_of(cr, workloads, queue_name)
                if state.cluster != was.cluster:
                    if state.cluster is None:  # given back: queued again, waited for anew
                        stale = now.obj["metadata"].get("resourceVersion")
                        state = dispatch_of({**cr, "status": {}}, workloads, queue_name)
                        clock.restart()
                    if on_note:
                        on_note(_moved(was, state))
                if on_progress:
                    on_progress(Progress(root.size, admission=state.summary()))
                # up, once the Workload (its own watch) has said where
                if state.ended or (until_up and state.up and state.cluster is not None):
                    return state
        finally:
            stop.set()
        if state.over:  # its last status never came: what is here is all there is
            return dataclasses.replace(state, ended=True)
        raise WaitTimeout(
            f"timed out after {timeout:g}s waiting for MiniCluster {root.name}: {state.summary()}"
        )


class _Deadlines:
    """How long a follow waits for the next change: ``timeout`` until the
    brokers run on a worker (again from the start when a worker gives it
    back); none while they run; LAST_STATUS_WAIT once the job is over, for
    rank 0's output to come."""

    def __init__(self, clock: Callable[[], float], timeout: float | None) -> None:
        self.clock, self.timeout = clock, timeout
        self.start = clock()
        self.over: float | None = None

    def restart(self) -> None:
        self.start = self.clock()

    def remaining(self, state: Dispatch) -> float | None:
        now = self.clock()
        if state.over:
            self.over = now if self.over is None else self.over
            return max(0.0, self.over + LAST_STATUS_WAIT - now)
        if state.up or self.timeout is None:
            return None
        return max(0.0, self.start + self.timeout - now)


def _moved(was: Dispatch, now: Dispatch) -> str:
    if now.cluster is not None:
        return f"dispatched by MultiKueue to worker cluster {now.cluster}"
    return f"worker cluster {was.cluster} gave it back; {now.waiting}"
