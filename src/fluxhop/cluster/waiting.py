"""Waiting for a MiniCluster: watches of its pods (and, while it is queued,
of its root and Kueue's Workload for it) until a condition holds.

Each watch runs in a daemon thread that hands its events over a queue, so
that a wait ends at its deadline whatever the watch is doing, and otherwise
on an event, never after a guessed sleep. A timeout says what is stuck and why
(the last Warning event of each pod still pending, or the queue's reason).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.cluster.watchstop import WatchStop
from fluxhop.errors import Expired, NotFound, NotInstalled, WaitTimeout
from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.spec.kueue import KUEUE_JOB_UID
from fluxhop.workload.marks import ROOT_KINDS
from fluxhop.workload.root import Root
from fluxhop.workload.status import (
    Progress,
    admission,
    completed,
    completion_index,
    disrupted,
    disruption,
    exit_code,
    failed,
    started,
)

__all__ = ["Waiting"]

STOPPED = (143, 137)  # SIGTERM, or SIGKILL once the grace period is over
LAST_STATE_WAIT = 10.0  # seconds to replay a gone pod's last changes
LAST_SEEN_KEPT = 16  # pods whose last state a long-lived client keeps


class Waiting:
    """The waits of ``MiniClusters`` (which it is a base of): they need only
    its API client and clock."""

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
    ) -> Progress:
        """Until ``until(progress)`` holds: first, for a queued MiniCluster, until
        its queue admits it; then one watch of its pods. ``since``: a pod just
        read; the watch starts from it (its changes, and every other pod's after
        it) instead of listing every pod, so that its deletion is an event."""
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
                    raise self._stuck(root, progress, timeout or 0) from None
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
        finally:
            stop.set()

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
        events: queue.Queue[Any] = queue.Queue()
        kind_name = ROOT_KINDS[root.target]
        self._watch(kind_name, {MINICLUSTER_LABEL: root.name}, stop, events)
        uid = root.obj["metadata"].get("uid")
        if uid:
            self._watch("Workload", {KUEUE_JOB_UID: uid}, stop, events, optional=True)
        workloads: dict[str, dict[str, Any]] = {}
        progress.admission = admission(queue_name, [])
        if on_progress:
            on_progress(progress)
        try:
            while True:
                item = self._next(events, self._remaining(deadline))
                if item is None:
                    raise WaitTimeout(
                        f"timed out after {timeout:g}s {progress.admission} (kubectl describe "
                        f"localqueue {queue_name} shows why)"
                    )
                kind_of_event, event, obj = item
                name = obj["metadata"]["name"]
                if kind_of_event == "Workload":
                    if event == "DELETED":
                        workloads.pop(name, None)
                    else:
                        workloads[name] = obj
                elif name == root.name:
                    if event == "DELETED":
                        raise NotFound(
                            f"MiniCluster {root.name} was deleted while {progress.admission}"
                        )
                    root = Root(root.target, obj)
                    if not root.suspended:
                        progress.admission = None
                        return root
                progress.admission = admission(queue_name, list(workloads.values()))
                if on_progress:
                    on_progress(progress)
        finally:
            stop.set()

    def _stuck(self, root: Root, progress: Progress, timeout: float) -> WaitTimeout:
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
        return WaitTimeout(
            f"timed out after {timeout:g}s waiting for MiniCluster {root.name}: "
            + "; ".join(reasons or ["no pods"])
        )

    def wait_ready(
        self,
        root: Root,
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> Progress:
        """Until every pod runs, or the job already ended (rank 0 finished or a
        pod failed; the Job controller then removes the other pods)."""

        def ready(progress: Progress) -> bool:
            lead_done = any(
                completion_index(p) == 0
                and p.get("status", {}).get("phase") in ("Succeeded", "Failed")
                for p in progress.pods.values()
            )
            return (
                lead_done
                or progress.count("Failed") > 0
                or progress.running + progress.finished >= root.size
            )

        return self.wait(root, ready, timeout=timeout, on_progress=on_progress)

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

    def wait_lead_started(
        self,
        root: Root,
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        other_than: str | None = None,
    ) -> dict[str, Any]:
        """Rank 0's pod once its container has started (``other_than``: not that
        pod, which a disruption ended)."""

        def lead(progress: Progress) -> dict[str, Any] | None:
            return self._lead(progress, lambda p: started(p, root.container), other_than)

        progress = self.wait(
            root, lambda p: lead(p) is not None, timeout=timeout, on_progress=on_progress
        )
        found = lead(progress)
        assert found is not None
        return found

    def wait_lead_end(
        self,
        root: Root,
        name: str,
        *,
        timeout: float | None = None,
        since: dict[str, Any] | None = None,
    ) -> int | None:
        """How rank 0's pod ``name`` ended: its exit code, or None when the job
        goes on without it - a disruption ended it (or it is gone), and the Job
        replaces it; or its queue took the MiniCluster back (Kueue suspends
        the Job, whose pods then exit), and the job runs again once admitted.
        A pod gone with its ended workload gives the workload's outcome."""

        def over(pod: dict[str, Any] | None) -> bool:
            return pod is None or disrupted(pod) or exit_code(pod, root.container) is not None

        pod = self.kube.get("Pod", name)
        if pod is None and since is not None:
            self._last_state(root, since)  # gone already: learn how it ended
        if not over(pod):
            progress = self.wait(root, lambda p: over(p.pods.get(name)), timeout=timeout, since=pod)
            pod = progress.pods.get(name)
        if pod is not None:
            self._remember(pod)  # why it ended, for interruption() once it is gone
        if pod is None:
            return self._ended_without_lead(root)
        if disrupted(pod):
            return None
        if root.queue:
            now = self.kube.get(ROOT_KINDS[root.target], root.name)
            if now is not None and Root(root.target, now).suspended:
                return None
        code = exit_code(pod, root.container)
        if code in STOPPED and pod["metadata"].get("deletionTimestamp"):
            # stopped by the Job controller: when another pod failed the Job,
            # that pod's code is the job's, not the signal rank 0 got
            now = self.kube.get(ROOT_KINDS[root.target], root.name)
            if now is not None and failed(now):
                return self.failed_pod_code(root) or code
        return code

    def interruption(self, name: str) -> str:
        """Why rank 0's pod ``name`` ended without ending the job (after
        ``wait_lead_end`` said so), in words."""
        pod = self.kube.get("Pod", name) or self.last_seen.get(name)
        if pod is None:
            return "it is gone"
        if disrupted(pod):
            return disruption(pod)
        return "its queue took the MiniCluster back; it runs again once admitted"

    def _ended_without_lead(self, root: Root) -> int | None:
        """Rank 0's pod is gone: the job goes on in the pod that replaces it,
        unless the workload has ended (its condition then says how; a Job
        deleted when it finishes takes its pods along) or is gone."""
        obj = self.kube.get(ROOT_KINDS[root.target], root.name)
        if obj is None:
            raise NotFound(f"MiniCluster {root.name} was deleted before rank 0 ended")
        if failed(obj):
            return self.failed_pod_code(root) or 1
        if completed(obj):
            return 0
        return None

    def _remember(self, pod: dict[str, Any]) -> None:
        """Keep a pod's last state seen (the last few pods only)."""
        self.last_seen.pop(pod["metadata"]["name"], None)
        self.last_seen[pod["metadata"]["name"]] = pod
        while len(self.last_seen) > LAST_SEEN_KEPT:
            del self.last_seen[next(iter(self.last_seen))]

    def _last_state(self, root: Root, since: dict[str, Any]) -> None:
        """A pod that is gone before it could be read: its changes since
        ``since`` (a state read earlier), replayed by a watch from its
        resourceVersion, tell how it ended (kept in last_seen)."""
        name = since["metadata"]["name"]
        # Expired: its history is compacted away, nothing more to learn; the
        # timeout is a bound only: the replay comes at once, or the 410
        with contextlib.suppress(WaitTimeout, Expired):
            self.wait(
                root,
                lambda p: name not in p.pods,
                timeout=LAST_STATE_WAIT,
                since=since,
                relist=False,
            )

    def failing_pod(self, root: Root) -> dict[str, Any] | None:
        """The pod whose own failure failed the workload: it ended with an
        exit code and nobody deleted it (the pods the Job controller stops
        then, rank 0 among them, are deleted: 143, or 137 after the grace)."""
        for pod in self.kube.list("Pod", labels=root.pod_selector):
            code = exit_code(pod, root.container)
            if code and not pod["metadata"].get("deletionTimestamp") and not disrupted(pod):
                return pod
        return None

    def failed_pod_code(self, root: Root) -> int | None:
        """The exit code of the pod whose own failure failed the workload, if any."""
        pod = self.failing_pod(root)
        return None if pod is None else exit_code(pod, root.container)

    def failure(self, root: Root) -> str | None:
        """Which pod other than rank 0 failed the workload, in words, or None."""
        pod = self.failing_pod(root)
        if pod is None or completion_index(pod) == 0:
            return None
        return (
            f"pod {pod['metadata']['name']} (rank {completion_index(pod)}) exited "
            f"{exit_code(pod, root.container)} and failed the Job, which stopped the other pods"
        )

    def wait_exit(self, root: Root, *, timeout: float | None = None) -> int:
        """The exit code of rank 0's Flux container that ends the job: not that
        of a pod a disruption ended or of one its queue took back (see
        wait_lead_end), whose job runs again in the pod that replaces it."""
        deadline = None if timeout is None else self.clock() + timeout
        ended: str | None = None
        while True:
            lead = self.wait_lead_started(root, timeout=self._remaining(deadline), other_than=ended)
            ended = lead["metadata"]["name"]
            code = self.wait_lead_end(root, ended, timeout=self._remaining(deadline))
            if code is not None:
                return code
