"""One watch of a MiniCluster's pods (and, while it is queued, of its root
and Kueue's Workload for it) until a condition holds: the mechanics every
named wait (waiting.py) runs on. A pod stuck where no wait helps (an image
that cannot be pulled, a missing Secret: workload/pod_problems.py) ends the
wait at once, in the node's words.

Each watch runs in a daemon thread that hands its events over a queue, so
that a wait ends at its deadline whatever the watch is doing, and otherwise
on an event, never after a guessed sleep. A timeout says what is stuck and why
(the last Warning event of each pod still pending, rank 0 running but its
instance not up, or the queue's reason).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.cluster.watchstop import WatchStop
from fluxhop.errors import NotFound, NotInstalled, PodStuck, WaitTimeout
from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.spec.kueue import KUEUE_JOB_UID
from fluxhop.workload.marks import ROOT_KINDS
from fluxhop.workload.pod_problems import STUCK, pod_problem
from fluxhop.workload.root import Root
from fluxhop.workload.status import Progress, admission, completion_index, disrupted, ready

__all__ = ["PodWatch"]

LAST_SEEN_KEPT = 16  # pods whose last state a long-lived client keeps


class PodWatch:
    """Watching a MiniCluster's pods, for ``Waiting``: it needs only an API
    client and a clock."""

    kube: Kube
    clock: Callable[[], float]
    last_seen: dict[str, dict[str, Any]]  # pod name -> its last state seen by a wait

    def _watch(
        self,
        kind_name: str,
        labels: dict[str, str],
        stop: WatchStop,
        events: queue.Queue[Any],
        *,
        optional: bool = False,
        resource_version: str | None = None,
        relist: bool = True,
    ) -> None:
        """Events of ``kind_name`` onto ``events`` as (kind, event, object), from
        a daemon thread, so that waits can time out; an ``optional`` kind whose
        API is not installed (Kueue's Workload) just sends nothing. From
        ``resource_version``: only the changes after it, no initial list."""

        def pump() -> None:
            try:
                watch = self.kube.watch(
                    kind_name,
                    labels=labels,
                    resource_version=resource_version,
                    relist=relist,
                    stop=stop,
                )
                for event, obj in watch:
                    events.put((kind_name, event, obj))
                    if stop.is_set():
                        return
            except NotInstalled:
                if not optional:
                    events.put(NotInstalled(f"{kind_name} is not served by this cluster"))
            except BaseException as err:  # handed to the waiting thread
                if not (optional and stop.is_set()):
                    events.put(err)

        threading.Thread(target=pump, name=f"watch-{kind_name}", daemon=True).start()

    @staticmethod
    def _next(events: queue.Queue[Any], remaining: float | None) -> tuple[str, str, Any] | None:
        """The next event, None on timeout; an error from a watch is raised."""
        try:
            item = events.get(timeout=remaining)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]

    def _remaining(self, deadline: float | None) -> float | None:
        return None if deadline is None else max(0.0, deadline - self.clock())

    def wait(
        self,
        root: Root,
        until: Callable[[Progress], bool],
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        since: dict[str, Any] | None = None,
        relist: bool = True,
        instance: bool = False,
    ) -> Progress:
        """Until ``until(progress)`` holds: first, for a queued MiniCluster, until
        its queue admits it; then one watch of its pods. ``since``: a pod just
        read; the watch starts from it (its changes, and every other pod's after
        it) instead of listing every pod, so that its deletion is an event.
        ``instance``: a timeout may blame rank 0 running but not Ready."""
        progress = Progress(root.size)
        deadline = None if timeout is None else self.clock() + timeout
        if root.queue and root.suspended and since is None:
            root = self._wait_admitted(root, progress, deadline, timeout or 0, on_progress)
        stop = WatchStop()  # set when the wait is over: its watches end at once
        events: queue.Queue[Any] = queue.Queue()
        version = None
        if since is not None:
            progress.pods[since["metadata"]["name"]] = since
            version = since["metadata"].get("resourceVersion")
        self._watch("Pod", root.pod_selector, stop, events, resource_version=version, relist=relist)
        try:
            while True:
                item = self._next(events, self._remaining(deadline))
                if item is None:
                    raise self._stuck(root, progress, timeout or 0, instance) from None
                _, event, pod = item
                name = pod["metadata"]["name"]
                if event == "DELETED":
                    progress.pods.pop(name, None)
                    self._remember(pod)  # its state when deleted: how it ended
                else:
                    progress.pods[name] = pod
                if on_progress:
                    on_progress(progress)
                if until(progress):
                    return progress
                if event == "DELETED" and not progress.pods and self._root_gone(root):
                    raise NotFound(f"MiniCluster {root.name} was deleted, and its pods with it")
                problem = pod_problem(pod) if event != "DELETED" else None
                if problem is not None and problem.reason in STUCK:
                    raise PodStuck(f"MiniCluster {root.name}: {problem.line()}")
        finally:
            stop.set()

    def _root_gone(self, root: Root) -> bool:
        """Whether the root is gone (or another of its name made since):
        asked once its last pod is deleted, so that a wait for pods that
        will never come (its owner deleted it, e.g. a Workflow deleted
        during PreRun) ends at once instead of at its timeout."""
        now = self.kube.get(ROOT_KINDS[root.target], root.name)
        uid = root.obj["metadata"].get("uid")
        return now is None or (uid is not None and now["metadata"].get("uid") != uid)

    def _root_changes(
        self,
        root: Root,
        remaining: Callable[[], float | None],
        stop: WatchStop,
        waiting: Callable[[], str],
    ) -> Iterator[tuple[Root, list[dict[str, Any]]]]:
        """The root and Kueue's Workloads for it (where Kueue is installed),
        each time either changes. It ends when nothing comes in ``remaining()``
        seconds (None: no limit): the caller's timeout. The root deleted is
        NotFound, saying what it was ``waiting`` for."""
        events: queue.Queue[Any] = queue.Queue()
        self._watch(ROOT_KINDS[root.target], {MINICLUSTER_LABEL: root.name}, stop, events)
        uid = root.obj["metadata"].get("uid")
        if uid:
            self._watch("Workload", {KUEUE_JOB_UID: uid}, stop, events, optional=True)
        workloads: dict[str, dict[str, Any]] = {}
        while True:
            item = self._next(events, remaining())
            if item is None:
                return
            kind_of_event, event, obj = item
            name = obj["metadata"]["name"]
            if kind_of_event == "Workload":
                if event == "DELETED":
                    workloads.pop(name, None)
                else:
                    workloads[name] = obj
            elif name == root.name:
                if event == "DELETED":
                    raise NotFound(f"MiniCluster {root.name} was deleted while {waiting()}")
                root = Root(root.target, obj)
            yield root, list(workloads.values())

    def _wait_admitted(
        self,
        root: Root,
        progress: Progress,
        deadline: float | None,
        timeout: float,
        on_progress: Callable[[Progress], None] | None,
    ) -> Root:
        """Watch the suspended root (and Kueue's Workload for it, where Kueue is
        installed) until the queue admits it: Kueue unsuspends it."""
        queue_name = root.queue or ""
        stop = WatchStop()  # set when the wait is over: its watches end at once
        progress.admission = admission(queue_name, [])
        if on_progress:
            on_progress(progress)
        try:
            for now, workloads in self._root_changes(
                root, lambda: self._remaining(deadline), stop, lambda: str(progress.admission)
            ):
                if not now.suspended:
                    progress.admission = None
                    return now
                progress.admission = admission(queue_name, workloads)
                if on_progress:
                    on_progress(progress)
        finally:
            stop.set()
        raise WaitTimeout(
            f"timed out after {timeout:g}s {progress.admission} (kubectl describe "
            f"localqueue {queue_name} shows why)"
        )

    def _stuck(
        self, root: Root, progress: Progress, timeout: float, instance: bool = False
    ) -> WaitTimeout:
        """What keeps the wait from its end: pods not running (with their last
        event), pods not made, or (``instance``: a wait for the instance to
        be up) rank 0 running but not Ready."""
        reasons = []
        for name, pod in sorted(progress.pods.items()):
            phase = pod.get("status", {}).get("phase", "Pending")
            if phase in ("Running", "Succeeded", "Failed"):
                continue
            why = ""
            events = [
                e for e in self.kube.events_for(name) if e.get("type") == "Warning"
            ] or self.kube.events_for(name)
            if events:
                last = events[-1]
                why = f" ({last.get('reason')}: {' '.join(str(last.get('message', '')).split())})"
            reasons.append(f"{name} {phase}{why}")
        missing = root.size - len(progress.pods)
        if missing > 0:
            reasons.append(f"{missing} pod(s) not created yet")
        lead = self._lead(progress, lambda p: not ready(p), None)
        if instance and not reasons and lead is not None:
            reasons.append(
                f"{lead['metadata']['name']} runs but is not Ready: its Flux instance is not"
                " up (a broker has not joined; flux overlay status in that pod says which)"
            )
        return WaitTimeout(
            f"timed out after {timeout:g}s waiting for MiniCluster {root.name}: "
            + "; ".join(reasons or ["no pods"])
        )

    @staticmethod
    def _lead(
        progress: Progress, holds: Callable[[dict[str, Any]], bool], other_than: str | None
    ) -> dict[str, Any] | None:
        """Rank 0's pod for which ``holds`` is true, not one a disruption ended
        (the Job replaces that one: its podFailurePolicy ignores disruptions)."""
        return next(
            (
                p
                for p in progress.pods.values()
                if completion_index(p) == 0
                and not disrupted(p)
                and p["metadata"]["name"] != other_than
                and holds(p)
            ),
            None,
        )

    def _remember(self, pod: dict[str, Any]) -> None:
        """Keep a pod's last state seen (the last few pods only)."""
        self.last_seen.pop(pod["metadata"]["name"], None)
        self.last_seen[pod["metadata"]["name"]] = pod
        while len(self.last_seen) > LAST_SEEN_KEPT:
            del self.last_seen[next(iter(self.last_seen))]
