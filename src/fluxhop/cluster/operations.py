"""MiniCluster operations against a cluster: create, find, wait, logs, scale,
delete.

The workload object (Job, JobSet or MiniCluster) is the *root*: it is applied
first, and every other object carries an ownerReference to it, so deleting
the root (one request) lets the garbage collector remove the rest, and a
failure part-way needs only that one delete. Pods cannot start before their
ConfigMap and Secret exist: the kubelet does not run a container until every
volume it mounts is there, and fluxhop applies both right after the root.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import (
    AlreadyExists,
    ClusterError,
    FluxhopError,
    InputError,
    Interrupted,
    NotFound,
    NotInstalled,
    NotOurs,
    WaitTimeout,
)
from fluxhop.render.objects import MANAGED_BY, MINICLUSTER_LABEL
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.marks import (
    OPERATED,
    ROOT_KINDS,
    SPEC_HASH,
    TARGET_LABEL,
    owner_reference,
    prepare,
)
from fluxhop.workload.root import Root
from fluxhop.workload.status import (
    Progress,
    Status,
    admission,
    completion_index,
    exit_code,
    started,
    status_of,
)

__all__ = ["MiniClusters", "selector_text"]

KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"  # the label Kueue puts on a Workload


class MiniClusters:
    """MiniClusters in one namespace of one cluster."""

    def __init__(self, kube: Kube, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.clock = clock

    # --- create -----------------------------------------------------------------

    def create(
        self,
        spec: MiniCluster,
        target: Target | str = Target.JOB,
        *,
        cluster_domain: str = "cluster.local",
        owners: Sequence[dict[str, Any]] = (),
    ) -> Root:
        """Apply the objects of ``spec``; re-applying an unchanged spec changes nothing.

        ``owners`` become the root's ownerReferences (e.g. a DWS Workflow), so
        that the whole MiniCluster is garbage-collected with them.
        """
        if spec.namespace != self.kube.namespace:
            spec = spec.renamed(namespace=self.kube.namespace)
        objects = prepare(spec, target, cluster_domain=cluster_domain)
        return self.apply_objects(objects, target, owners=owners)

    def apply_objects(
        self,
        objects: list[dict[str, Any]],
        target: Target | str,
        *,
        owners: Sequence[dict[str, Any]] = (),
    ) -> Root:
        """Apply rendered objects whose last one is the (marked) root."""
        root_obj = objects[-1]
        name = root_obj["metadata"]["name"]
        if owners:
            root_obj["metadata"]["ownerReferences"] = [dict(owner) for owner in owners]
        existing = self.kube.get(root_obj["kind"], name)
        if existing is not None:
            annotations = existing["metadata"].get("annotations") or {}
            if annotations.get(SPEC_HASH) != root_obj["metadata"]["annotations"][SPEC_HASH]:
                raise AlreadyExists(
                    f"MiniCluster {name} already exists in namespace {self.kube.namespace} with a "
                    f"different spec; delete it first (fluxhop delete {name}) or pick another --name"
                )
        try:
            root = self.kube.apply(root_obj)
            reference = owner_reference(root)
            for obj in objects[:-1]:
                if existing is not None and obj["kind"] == "Secret":
                    continue  # the CURVE key is created once, never rotated by a re-apply
                child = copy.deepcopy(obj)
                child["metadata"]["ownerReferences"] = [reference]
                self.kube.apply(child)
        except BaseException as err:
            # Once the root's apply is sent it may have been committed, even when
            # the answer never came (a timeout) or Ctrl-C came first: undo it by
            # name. Its children are owned by it, so one DELETE removes them all.
            if existing is None:
                self._undo(root_obj, err)
            raise
        return Root(target, root)

    def _undo(self, root_obj: dict[str, Any], cause: BaseException) -> None:
        """Delete the root this create may have made, and confirm it is gone;
        a root that is not ours (another spec, another manager) stays."""
        kind_name, name = root_obj["kind"], root_obj["metadata"]["name"]
        ours = root_obj["metadata"]["annotations"][SPEC_HASH]
        try:
            current = self.kube.get(kind_name, name)
            if current is None:
                return
            if (current["metadata"].get("annotations") or {}).get(SPEC_HASH) != ours:
                return
            self.kube.delete(kind_name, name)
            left = self.kube.get(kind_name, name)
            if left is not None and not left["metadata"].get("deletionTimestamp"):
                raise ClusterError(f"{kind_name} {name} is still there after its DELETE")
        except (FluxhopError, KeyboardInterrupt) as undo_err:
            note = (
                f"; and undoing it failed ({undo_err or 'interrupted'}): {kind_name} {name} may "
                f"be left in namespace {self.kube.namespace}; delete it with fluxhop delete {name}"
            )
            if isinstance(cause, FluxhopError):
                cause.args = (f"{cause}{note}",)
            elif isinstance(cause, KeyboardInterrupt):
                raise Interrupted(f"interrupted{note}") from None

    # --- find / status ------------------------------------------------------------

    def find(self, name: str) -> Root | None:
        for target, kind_name in ROOT_KINDS.items():
            try:
                obj = self.kube.get(kind_name, name)
            except NotInstalled:
                continue
            if obj is None:
                continue
            if _owned_by_a_root(obj):
                continue  # e.g. the Job an operator (the Flux Operator's, or ours) made
            labels = obj["metadata"].get("labels") or {}
            if labels.get(MANAGED_BY) == "fluxhop":
                return Root(labels.get(TARGET_LABEL, target), obj)
            if OPERATED in (obj["metadata"].get("annotations") or {}):
                return Root(target, obj)  # a MiniCluster resource fluxhop's operator runs
            raise NotOurs(
                f"{kind_name} {name} exists but was not created by fluxhop; leaving it alone"
            )
        return None

    def require(self, name: str) -> Root:
        root = self.find(name)
        if root is None:
            raise NotFound(f"MiniCluster {name} not found in namespace {self.kube.namespace}")
        return root

    def pods(self, root: Root) -> list[dict[str, Any]]:
        return self.kube.list("Pod", labels=root.pod_selector)

    def lead_pod(self, root: Root) -> dict[str, Any] | None:
        leads = [p for p in self.pods(root) if completion_index(p) == 0]
        leads.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        return leads[-1] if leads else None

    def _workload(self, root: Root) -> dict[str, Any]:
        """The object whose conditions tell how the job ended."""
        if root.target is Target.MINICLUSTER:
            return self.kube.get("Job", root.name) or {}
        return root.obj

    def status(self, root: Root) -> Status:
        return status_of(root, self._workload(root), self.pods(root), datetime.now(UTC))

    def list(self) -> list[Status]:
        statuses = []
        for target, kind_name in ROOT_KINDS.items():
            try:
                objects = self.kube.list(
                    kind_name, labels={MANAGED_BY: "fluxhop", TARGET_LABEL: target}
                )
            except NotInstalled:
                continue
            if target is Target.MINICLUSTER:  # and the resources fluxhop's operator runs
                names = {o["metadata"]["name"] for o in objects}
                objects += [
                    o
                    for o in self.kube.list(kind_name)
                    if OPERATED in (o["metadata"].get("annotations") or {})
                    and o["metadata"]["name"] not in names
                ]
            statuses += [
                self.status(Root(target, obj)) for obj in objects if not _owned_by_a_root(obj)
            ]
        return sorted(statuses, key=lambda s: s.name)

    # --- wait / logs --------------------------------------------------------------

    def _watch(
        self,
        kind_name: str,
        labels: dict[str, str],
        stop: threading.Event,
        events: queue.Queue[Any],
        *,
        optional: bool = False,
    ) -> None:
        """Events of ``kind_name`` onto ``events`` as (kind, event, object), from
        a daemon thread, so that waits can time out; an ``optional`` kind whose
        API is not installed (Kueue's Workload) just sends nothing."""

        def pump() -> None:
            try:
                for event, obj in self.kube.watch(kind_name, labels=labels):
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
    ) -> Progress:
        """Until ``until(progress)`` holds: first, for a queued MiniCluster, until
        its queue admits it; then one watch of its pods."""
        progress = Progress(root.size)
        deadline = None if timeout is None else self.clock() + timeout
        if root.queue and root.suspended:
            root = self._wait_admitted(root, progress, deadline, timeout or 0, on_progress)
        stop = threading.Event()
        events: queue.Queue[Any] = queue.Queue()
        self._watch("Pod", root.pod_selector, stop, events)
        try:
            while True:
                item = self._next(events, self._remaining(deadline))
                if item is None:
                    raise self._stuck(root, progress, timeout or 0) from None
                _, event, pod = item
                name = pod["metadata"]["name"]
                if event == "DELETED":
                    progress.pods.pop(name, None)
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
        stop = threading.Event()
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

    def wait_lead_started(
        self,
        root: Root,
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> dict[str, Any]:
        def lead_started(progress: Progress) -> bool:
            return any(
                completion_index(p) == 0 and started(p, root.container)
                for p in progress.pods.values()
            )

        progress = self.wait(root, lead_started, timeout=timeout, on_progress=on_progress)
        return next(
            p
            for p in progress.pods.values()
            if completion_index(p) == 0 and started(p, root.container)
        )

    def wait_exit(self, root: Root, *, timeout: float | None = None) -> int:
        """The exit code of rank 0's Flux container, once it has one."""

        def lead_exited(progress: Progress) -> bool:
            return any(
                completion_index(p) == 0 and exit_code(p, root.container) is not None
                for p in progress.pods.values()
            )

        progress = self.wait(root, lead_exited, timeout=timeout)
        lead = next(
            p
            for p in progress.pods.values()
            if completion_index(p) == 0 and exit_code(p, root.container) is not None
        )
        code = exit_code(lead, root.container)
        return 1 if code is None else code

    def logs(self, root: Root, *, follow: bool = False) -> Iterator[str]:
        lead = self.lead_pod(root)
        if lead is None:
            raise NotFound(f"MiniCluster {root.name} has no rank 0 pod yet")
        return self.kube.log(lead["metadata"]["name"], root.container, follow=follow)

    # --- scale / delete -----------------------------------------------------------

    def scale(self, root: Root, size: int) -> Root:
        if size < 1:
            raise InputError(f"--size must be 1 or more, not {size}")
        if size > root.max_size:
            raise InputError(
                f"--size {size} is above the MiniCluster's maxSize {root.max_size}: the broker config lists "
                f"{root.max_size} hosts; recreate it with a larger maxSize (--max-size)"
            )
        if root.target is Target.JOBSET:
            raise InputError(
                "a JobSet MiniCluster cannot be resized; create it with --target job to scale it"
            )
        problem = root.resize_problem()
        if problem is not None:
            raise InputError(problem)
        if root.target is Target.JOB:
            obj = self.kube.merge_patch(
                "Job", root.name, {"spec": {"parallelism": size, "completions": size}}
            )
        else:
            obj = self.kube.merge_patch("MiniCluster", root.name, {"spec": {"size": size}})
        return Root(root.target, obj)

    def delete(self, name: str) -> Root:
        """Delete a MiniCluster fluxhop created (its root, after checking the
        label, so that fluxhop never deletes someone else's Job)."""
        root = self.require(name)
        self.delete_root(root)
        return root

    def delete_root(self, root: Root) -> None:
        """One DELETE of the root; the garbage collector removes the rest."""
        self.kube.delete(ROOT_KINDS[root.target], root.name)


def _owned_by_a_root(obj: dict[str, Any]) -> bool:
    owners = {ref.get("kind") for ref in obj["metadata"].get("ownerReferences") or []}
    return bool(owners & set(ROOT_KINDS.values()))


def selector_text(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())
