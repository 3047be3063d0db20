"""A created MiniCluster run to its end on a cluster: progress while the pods
come up, rank 0's output streamed (and, when a disruption ends rank 0's pod,
the output of the pod that replaces it), its exit code returned, and
everything deleted afterwards (also on Ctrl-C) unless it is to be kept.
`run`, `create`'s callers and `trainer run` share it."""

from __future__ import annotations

import sys
from collections.abc import Callable

from fluxhop.cli.progress import ProgressDisplay
from fluxhop.cluster.logstream import follow_log
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import interrupt_status
from fluxhop.workload import Root
from fluxhop.workload.dispatch import Dispatch

__all__ = ["dispatch_failure", "run_root"]


def run_root(
    name: str,
    create: Callable[[], Root],
    ops: MiniClusters,
    *,
    interactive: bool,
    keep: bool,
    timeout: float,
) -> int:
    """Run ``create``, then stream rank 0 and return its exit code (or, when
    ``interactive``, wait until the pods run); delete unless ``keep``."""
    root = None
    with ProgressDisplay(name) as display:
        try:
            root = create()
            if root.dispatched:  # run on a worker cluster, followed from here
                code = _follow_dispatched(root, ops, display, interactive, timeout)
                keep = keep or (interactive and code == 0)
                return code
            if interactive:
                ops.wait_ready(root, timeout=timeout, on_progress=display.update)
                display.note(
                    f"interactive MiniCluster {root.name} is up: fluxhop shell {root.name} "
                    f"(or fluxhop proxy {root.name}); fluxhop delete {root.name} when done"
                )
                keep = True
                return 0
            lead = ops.wait_lead_started(root, timeout=timeout, on_progress=display.update)
            while True:
                display.stop()
                name = lead["metadata"]["name"]
                for line in follow_log(ops.kube, name, root.container):
                    sys.stdout.write(line)
                    sys.stdout.flush()
                code = ops.wait_lead_end(root, name, since=lead)
                if code is not None:
                    why = ops.failure(root) if code else None
                    if why:  # rank 0 was stopped because another pod failed
                        display.note(why)
                    return code
                display.note(
                    f"rank 0's pod {name} ended before the job did: {ops.interruption(name)}; "
                    "the job runs again in the pod that replaces it"
                )
                lead = ops.wait_lead_started(
                    root, timeout=timeout, on_progress=display.update, other_than=name
                )
        except KeyboardInterrupt as err:
            display.note("interrupted" + ("" if keep else "; deleting the MiniCluster"))
            return interrupt_status(err)
        finally:
            if root is not None and not keep:
                ops.delete_root(root)


def _follow_dispatched(
    root: Root, ops: MiniClusters, display: ProgressDisplay, interactive: bool, timeout: float
) -> int:
    """A MiniCluster MultiKueue runs on a worker cluster: say which, wait
    (with Kueue's reason while none has room), print the end of rank 0's
    output that came back in its status, and return its exit code."""
    there = ops.follow_dispatched(
        root,
        until_up=interactive,
        timeout=timeout,
        on_progress=display.update,
        on_note=display.note,
    )
    if not there.ended:  # interactive, and up
        display.note(
            f"interactive MiniCluster {root.name} is up on worker cluster {there.cluster}: "
            "fluxhop shell with that cluster's --context; fluxhop delete here when done"
        )
        return 0
    display.stop()
    if there.output:
        sys.stdout.write(there.output if there.output.endswith("\n") else there.output + "\n")
        sys.stdout.flush()
    if there.exit_code:
        display.note(dispatch_failure(there))
    return there.exit_code or 0


def dispatch_failure(there: Dispatch) -> str:
    """How a dispatched MiniCluster failed, in one line."""
    where = f"on worker cluster {there.cluster}" if there.cluster else "before any worker ran it"
    return f"failed {where}: {there.failure or f'exit code {there.exit_code}'}"
