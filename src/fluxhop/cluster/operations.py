"""MiniCluster operations against a cluster: create, find, wait (waiting.py),
logs, scale, delete.

The workload object (Job, JobSet or MiniCluster) is the *root*: it is applied
first, and every other object carries an ownerReference to it, so deleting
the root (one request) lets the garbage collector remove the rest, and a
failure part-way needs only that one delete. Pods cannot start before their
ConfigMap and Secret exist: the kubelet does not run a container until every
volume it mounts is there, and fluxhop applies both right after the root.
"""

from __future__ import annotations

import contextlib
import copy
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.cluster.dispatchwait import DispatchWait
from fluxhop.cluster.lead_volume import refuse_foreign_claims, with_lead_volume
from fluxhop.cluster.logstream import follow_log
from fluxhop.cluster.queue_route import queue_route
from fluxhop.cluster.view_volume import resolved_view_volume, view_undecided
from fluxhop.cluster.waiting import Waiting
from fluxhop.errors import (
    AlreadyExists,
    ClusterError,
    FluxhopError,
    FluxhopWarning,
    InputError,
    Interrupted,
    NotFound,
    NotInstalled,
    NotOurs,
)
from fluxhop.render import check_cluster_domain
from fluxhop.render.objects import MANAGED_BY
from fluxhop.render.targets import Target
from fluxhop.spec.kueue import queue_of
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
    Status,
    completion_index,
    ended_resize_problem,
    started,
    status_of,
)

__all__ = ["MiniClusters", "selector_text"]

UNREAD = object()  # the root not read yet (None: read, and there is none)


class MiniClusters(Waiting, DispatchWait):
    """MiniClusters in one namespace of one cluster."""

    def __init__(self, kube: Kube, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.clock = clock
        self.last_seen = {}

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
        check_cluster_domain(cluster_domain)  # before any request
        if spec.namespace != self.kube.namespace:
            spec = spec.renamed(namespace=self.kube.namespace)
        spec = _routed(self.kube, spec, Target.parse(target))
        health = spec.spec.health
        if health and health.on_failure == "replace" and Target.parse(target) != Target.MINICLUSTER:
            warnings.warn(
                "spec.health.onFailure replace: only fluxhop's operator replaces pods, those of "
                "a MiniCluster resource applied to it; here a failing rank stays drained",
                FluxhopWarning,
                stacklevel=2,
            )
        # how the view reaches the pods, and where rank 0 keeps its state:
        # as made, or decided now
        existing: dict[str, Any] | object | None = UNREAD
        parsed = Target.parse(target)
        if spec.spec.interactive or view_undecided(spec, parsed):
            found = self.kube.get(ROOT_KINDS[parsed], spec.name)
            spec = resolved_view_volume(self.kube, spec, parsed, existing=found)
            if spec.spec.interactive:
                spec = with_lead_volume(self.kube, spec, target, existing=found)
            existing = found
        objects = prepare(spec, target, cluster_domain=cluster_domain)
        return self.apply_objects(objects, target, owners=owners, existing=existing)

    def apply_objects(
        self,
        objects: list[dict[str, Any]],
        target: Target | str,
        *,
        owners: Sequence[dict[str, Any]] = (),
        existing: dict[str, Any] | object | None = UNREAD,
    ) -> Root:
        """Apply rendered objects whose last one is the (marked) root
        (``existing``: the root as just read, when the caller read it)."""
        root_obj = objects[-1]
        name = root_obj["metadata"]["name"]
        if owners:
            root_obj["metadata"]["ownerReferences"] = [dict(owner) for owner in owners]
        if existing is UNREAD:
            existing = self.kube.get(root_obj["kind"], name)
        assert existing is None or isinstance(existing, dict)
        if existing is not None:
            annotations = existing["metadata"].get("annotations") or {}
            if annotations.get(SPEC_HASH) != root_obj["metadata"]["annotations"][SPEC_HASH]:
                raise AlreadyExists(
                    f"MiniCluster {name} already exists in namespace {self.kube.namespace} with a "
                    f"different spec; delete it first (fluxhop delete {name}) or pick another --name"
                )
        if existing is None:
            refuse_foreign_claims(self.kube, objects)
        try:
            # an unchanged spec: the root stays as it is (fields that fluxhop
            # scale or Kueue set since are theirs, and applying the first value
            # again would conflict); only the children are applied, to finish
            # what an interrupted create left out
            same_owners = existing is not None and _owner_uids(existing) == _owner_uids(root_obj)
            root = existing if existing is not None and same_owners else self.kube.apply(root_obj)
            reference = owner_reference(root)
            for obj in objects[:-1]:
                child = copy.deepcopy(obj)
                child["metadata"]["ownerReferences"] = [reference]
                if existing is not None and obj["kind"] == "Secret":
                    # the CURVE key is created once, never rotated by a re-apply;
                    # made now only if an interrupted create never got to it
                    with contextlib.suppress(AlreadyExists):
                        self.kube.create(child)
                    continue
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

    def find(self, name: str, targets: Iterable[Target] | None = None) -> Root | None:
        """The MiniCluster ``name`` fluxhop made, looked for as each of
        ``targets`` (every kind when None: one GET each)."""
        for target in ROOT_KINDS if targets is None else targets:
            kind_name = ROOT_KINDS[target]
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
            if Root(target, obj).dispatched:
                return Root(target, obj)  # one MultiKueue runs elsewhere: shown, deleted
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
        if root.dispatched:
            manager = (root.obj.get("spec") or {}).get("managedBy")
            raise InputError(
                f"MiniCluster {root.name} runs on another cluster ({manager} keeps it): its pods "
                "are there; use that cluster's context (--context), and status.output here for "
                "the end of rank 0's output"
            )
        leads = [p for p in self.pods(root) if completion_index(p) == 0]
        leads.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        return leads[-1] if leads else None

    def _workload(self, root: Root) -> dict[str, Any]:
        """The object whose conditions tell how the job ended."""
        if root.target is Target.MINICLUSTER and root.dispatched:
            return root.obj  # no Job here: its status is the worker's, copied back
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
            if target is Target.MINICLUSTER:  # and the resources fluxhop's operator runs,
                # or hands to another controller (MultiKueue: run on a worker cluster)
                names = {o["metadata"]["name"] for o in objects}
                objects += [
                    o
                    for o in self.kube.list(kind_name)
                    if (OPERATED in (o["metadata"].get("annotations") or {})
                        or Root(target, o).dispatched)
                    and o["metadata"]["name"] not in names
                ]  # fmt: skip
            statuses += [
                self.status(Root(target, obj)) for obj in objects if not _owned_by_a_root(obj)
            ]
        return sorted(statuses, key=lambda s: s.name)

    # --- logs -------------------------------------------------------------------

    def logs(self, root: Root, *, follow: bool = False) -> Iterator[str]:
        lead = self.lead_pod(root)
        if lead is None:
            raise NotFound(f"MiniCluster {root.name} has no rank 0 pod yet")
        if not started(lead, root.container):  # the API answers nothing for an unscheduled pod
            raise NotFound(f"rank 0's pod {lead['metadata']['name']} has not started yet: no log")
        if follow:  # across an API server restart, as run does
            return follow_log(self.kube, lead["metadata"]["name"], root.container)
        return self.kube.log(lead["metadata"]["name"], root.container)

    # --- scale / delete -----------------------------------------------------------

    def scale(self, root: Root, size: int) -> Root:
        if root.dispatched:
            raise InputError(
                f"MiniCluster {root.name} runs on another cluster, whose copy a new size here "
                "does not reach; delete it and create it with the new size"
            )
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
        # ended: the Job, or rank 0 (its exit ends the instance before the Job ends)
        problem = root.resize_problem() or ended_resize_problem(root.name, self.status(root).state)
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


def _routed(kube: Kube, spec: MiniCluster, target: Target) -> MiniCluster:
    """``spec`` as its queue sends it: to MultiKueue (spec.managedBy) when
    the queue dispatches to other clusters and the spec names no manager."""
    queue = queue_of(spec)
    if queue is None:
        return spec
    dispatcher = queue_route(kube, queue, target)
    if dispatcher is None or spec.spec.managed_by == dispatcher:
        return spec
    if spec.spec.managed_by is not None:
        raise InputError(
            f"spec.managedBy {spec.spec.managed_by}: queue {queue!r} dispatches to other "
            f"clusters ({dispatcher}); drop spec.managedBy (fluxhop sets it) or pick a queue "
            "that runs here"
        )
    routed = spec.model_copy(deep=True)
    routed.spec.managed_by = dispatcher
    return routed


def _owner_uids(obj: dict[str, Any]) -> set[str]:
    return {ref.get("uid", "") for ref in obj["metadata"].get("ownerReferences") or []}


def _owned_by_a_root(obj: dict[str, Any]) -> bool:
    owners = {ref.get("kind") for ref in obj["metadata"].get("ownerReferences") or []}
    return bool(owners & set(ROOT_KINDS.values()))


def selector_text(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())
