"""Following a MiniCluster that runs on another cluster (``spec.managedBy``,
Kueue's MultiKueue) from the cluster it was created on: no pod of it is
here, so the watch is of its resource, whose status MultiKueue copies back
from the worker, and of Kueue's Workload for it, which says which worker
took it, or why none has yet (workload/dispatch.py reads the two)."""

from __future__ import annotations

from collections.abc import Callable

from fluxhop.cluster.podwatch import PodWatch
from fluxhop.cluster.watchstop import WatchStop
from fluxhop.errors import WaitTimeout
from fluxhop.workload.dispatch import Dispatch, dispatch_of
from fluxhop.workload.root import Root
from fluxhop.workload.status import Progress

__all__ = ["DispatchWait"]


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
        deadline = None if timeout is None else self.clock() + timeout
        stop = WatchStop()  # set when the wait is over: its watches end at once
        queue_name = root.queue or ""
        state = dispatch_of(root.obj, [], queue_name)
        try:
            changes = self._root_changes(
                root,
                lambda: None if state.up else self._remaining(deadline),  # until they run
                stop,
                lambda: state.summary(),
            )
            for now, workloads in changes:
                was, state = state, dispatch_of(now.obj, workloads, queue_name)
                if on_note and state.cluster != was.cluster:
                    on_note(_moved(was, state))
                if on_progress:
                    on_progress(Progress(root.size, admission=state.summary()))
                # up, once the Workload (its own watch) has said where
                if state.ended or (until_up and state.up and state.cluster is not None):
                    return state
        finally:
            stop.set()
        raise WaitTimeout(
            f"timed out after {timeout:g}s waiting for MiniCluster {root.name}: {state.summary()}"
        )


def _moved(was: Dispatch, now: Dispatch) -> str:
    if now.cluster is not None:
        return f"dispatched by MultiKueue to worker cluster {now.cluster}"
    return f"worker cluster {was.cluster} gave it back; {now.waiting}"
