"""The named waits for a MiniCluster (every pod running, its instance up,
rank 0 started or ended, the job's exit code) and what its pods say about
how it failed. The watching itself is ``PodWatch``'s (podwatch.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from fluxhop.cluster.podwatch import PodWatch
from fluxhop.errors import Expired, NotFound, PodStuck, WaitTimeout
from fluxhop.workload.marks import ROOT_KINDS
from fluxhop.workload.pod_problems import pod_problem
from fluxhop.workload.root import Root
from fluxhop.workload.status import (
    Progress,
    completed,
    completion_index,
    disrupted,
    disruption,
    exit_code,
    failed,
    ready,
    started,
)

__all__ = ["Waiting"]

STOPPED = (143, 137)  # SIGTERM, or SIGKILL once the grace period is over
LAST_STATE_WAIT = 10.0  # seconds to replay a gone pod's last changes


class Waiting(PodWatch):
    """The waits of ``MiniClusters`` (which it is a base of): they need only
    its API client and clock."""

    def wait_ready(
        self,
        root: Root,
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> Progress:
        """Until every pod runs, or the job already ended (rank 0 finished or a
        pod failed; the Job controller then removes the other pods)."""

        def running(progress: Progress) -> bool:
            return _ended(progress) or progress.running + progress.finished >= root.size

        return self.wait(root, running, timeout=timeout, on_progress=on_progress)

    def wait_instance_up(
        self,
        root: Root,
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> Progress:
        """Until every pod runs and rank 0's pod is Ready, which its
        readinessProbe makes mean its broker reached the run state: every
        broker of the quorum joined and the instance takes jobs. Or until the
        job already ended, as in :meth:`wait_ready`. Pods without that probe
        (the Flux Operator's) are Ready once they run: then every pod running
        is all this waits for."""

        def up(progress: Progress) -> bool:
            running = progress.running + progress.finished >= root.size
            return _ended(progress) or (running and self._lead(progress, ready, None) is not None)

        return self.wait(root, up, timeout=timeout, on_progress=on_progress, instance=True)

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
        """Which pod other than rank 0 failed the workload, in words, or None;
        any pod's container killed for its memory (rank 0's too: its exit code
        137 alone does not say why)."""
        pod = self.failing_pod(root)
        problem = None if pod is None else pod_problem(pod)
        if problem is not None and problem.reason == "OOMKilled":
            return problem.line()
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

    def wait_pods_gone(self, root: Root, *, timeout: float | None = None) -> None:
        """Until none of its pods is left, once its root is deleted (the
        garbage collector deletes them; each goes once its containers have
        stopped, within its grace period): nothing of it holds its volumes
        any more. Each round watches from the newest pod listed, so that any
        pod's deletion after that list is an event."""
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            left = self.kube.list("Pod", labels=root.pod_selector)
            if not left:
                return
            newest = max(left, key=lambda p: int(p["metadata"].get("resourceVersion") or 0))
            try:
                self.wait(root, lambda progress: not progress.pods,
                          timeout=self._remaining(deadline), since=newest)  # fmt: skip
            except PodStuck:
                continue  # a pod that could never start (its image): it goes all the same
            except WaitTimeout:
                names = ", ".join(sorted(p["metadata"]["name"] for p in left))
                raise WaitTimeout(
                    f"MiniCluster {root.name}: pods still there {timeout:.0f} s after its delete "
                    f"({names}); their containers have not stopped"
                ) from None


def _ended(progress: Progress) -> bool:
    """The job ended before it came up: rank 0 finished or a pod failed (the
    Job controller then removes the other pods)."""
    lead_done = any(
        completion_index(p) == 0 and p.get("status", {}).get("phase") in ("Succeeded", "Failed")
        for p in progress.pods.values()
    )
    return lead_done or progress.count("Failed") > 0
