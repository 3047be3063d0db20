"""Reconcile one ``MiniCluster`` resource: the same objects ``fluxhop create
--target job`` makes (one renderer: ``prepare``, ``MiniClusters``), the Job
owned by the resource so that deleting it removes everything, and a status
that says what is happening.

* Idempotent: server-side apply with field manager ``fluxhop-operator``; an
  unchanged resource makes no write at all (the status is patched only when
  it changes, events only on a transition).
* The Job's children (ConfigMap, Secret, Service, NetworkPolicy; the
  PersistentVolumeClaim of spec.leadState) are made
  first, owned like the Job by the resource: a Job means they all exist, so
  a reconcile never looks for them (and deleting the resource removes all
  in one round of the garbage collector). The CURVE Secret is created once
  and never rotated.
* Given what the operator's watches have shown (``Seen``: the Job and its
  pods, operator/cache.py), a reconcile of an unchanged resource sends no
  request at all.
* A change a running MiniCluster can take - its size, within maxSize - is
  applied in place, exactly as ``fluxhop scale`` does (the Job's parallelism),
  and refused like it where Kueue would restart the MiniCluster for it;
  any other change is reported on the resource (condition SpecApplied False,
  and an event), never silently ignored. "Change" is of what the resource
  asks for (``resource_hash``), not of what this fluxhop renders for it, so
  an upgraded operator leaves running MiniClusters alone.
* A bad spec gets the one-line message the CLI prints, as condition Failed
  and a Warning event.
"""

from __future__ import annotations

import contextlib
import copy
import time
import warnings
from datetime import UTC, datetime
from typing import Any

from fluxhop.cluster.lead_volume import refuse_foreign_claims, with_lead_volume
from fluxhop.cluster.operations import MiniClusters
from fluxhop.cluster.view_volume import resolved_view_volume
from fluxhop.errors import AlreadyExists, FluxhopError, FluxhopWarning, SpecError, clipped
from fluxhop.operator.cache import Outcome, Seen, Written
from fluxhop.operator.dispatched import reconcile_dispatched
from fluxhop.operator.kueue import (
    Follow,
    held_size_problem,
    queued,
    resize_workload,
    strip_queue,
    workload_for,
)
from fluxhop.operator.resource import (
    AUTOSCALE_STATUS,
    FIELD_MANAGER,
    HEALTH_STATUS,
    OUTPUT_STATUS,
    managed_elsewhere,
    operated,
    post_event,
    queued_elsewhere,
    read_spec,
    resource_hash,
)
from fluxhop.operator.status import OUTPUT_LINES, Problem, output_tail, resource_status
from fluxhop.render.bundle import DEFAULT_PATHS
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.marks import (
    CONFIG_DIR,
    FLUX_ROOT,
    LEAD_CONTAINER,
    MAX_SIZE,
    OPERATED,
    SPEC_HASH,
    owner_reference,
    prepare,
)
from fluxhop.workload.root import Root
from fluxhop.workload.status import completion_index, ended_resize_problem, job_state

__all__ = ["CREATED_SIZE", "RESOURCE_HASH", "Reconciler"]

_STEPS = ("Ready", "Running", "Succeeded")  # each turning True is an event
CREATED_SIZE = "fluxhop.io/created-size"  # on the Job: the size it was rendered for
RESOURCE_HASH = "fluxhop.io/resource-hash"  # on the Job: the resource spec it was made from
# on the Job: "first" - its children were made before it (a Job an older
# operator made may lack some, after an interrupted create: those are looked for)
CHILDREN = "fluxhop.io/children"
NODES_KEPT = 30.0  # seconds a list of the nodes decides flux.container.volume auto


class Reconciler:
    def __init__(
        self,
        ops: MiniClusters,
        *,
        cluster_domain: str = "cluster.local",
        operator_namespace: str | None = None,
    ) -> None:
        self.ops = ops
        self.kube = ops.kube
        self.cluster_domain = cluster_domain
        self.operator_namespace = operator_namespace  # where it runs: may read metrics
        self._nodes: tuple[float, list[dict[str, Any]]] | None = None
        self._views: dict[str, str] = {}  # resource uid -> how its view was decided

    def _view_decided(
        self, cr: dict[str, Any], spec: MiniCluster, job: dict[str, Any] | None
    ) -> MiniCluster:
        """``spec`` with flux.container.volume auto decided once per
        resource: as its Job has it, else by the nodes, and then kept, so
        that a create retried (a lagging watch) never renders it the other
        way over what it already made."""
        uid = str(cr["metadata"].get("uid", ""))
        if spec.spec.flux.container.volume == "auto" and uid in self._views:
            spec = spec.model_copy(deep=True)
            spec.spec.flux.container.volume = self._views[uid]  # type: ignore[assignment]
        decided = resolved_view_volume(self.kube, spec, Target.JOB, existing=job, nodes=self.nodes)
        if uid and decided.spec.flux.container.volume != "auto":
            self._views[uid] = decided.spec.flux.container.volume
        return decided

    def nodes(self) -> list[dict[str, Any]]:
        """The cluster's nodes, listed at most every NODES_KEPT seconds: what
        a burst of creates decides flux.container.volume auto from."""
        now = time.monotonic()
        if self._nodes is None or now - self._nodes[0] > NODES_KEPT:
            self._nodes = (now, self.kube.list("Node"))
        return self._nodes[1]

    # --- events -----------------------------------------------------------------------

    def event(self, cr: dict[str, Any], kind: str, reason: str, message: str, out: Outcome) -> None:
        post_event(self.kube, cr, kind, reason, message)
        out.writes.append(f"event {reason}")

    # --- reconcile --------------------------------------------------------------------

    def reconcile(self, cr: dict[str, Any], seen: Seen | None = None) -> Outcome:
        """Bring ``cr``'s objects and status to what it asks for; what it
        reads comes from ``seen`` where given, else from the API server."""
        out = Outcome()
        self._written = seen.written if seen is not None else Written()
        if not self._written.behind(cr):
            self._written = Written()
        name = cr["metadata"]["name"]
        if managed_elsewhere(cr):  # spec.managedBy: another controller's, but its Workload
            if queued_elsewhere(cr):
                out.writes += reconcile_dispatched(self.kube, cr, cluster_domain=self.cluster_domain,
                                                   operator_namespace=self.operator_namespace)  # fmt: skip
            return out
        try:
            spec, said = read_spec(cr, self.kube.namespace)
        except SpecError as err:
            out.problem = Problem("Failed", "InvalidSpec", str(err))
            self._report(cr, None, [], 1, out)
            return out
        job = seen.job if seen is not None else self.kube.get("Job", name)
        follow: Follow | None = None
        try:
            if job is None:
                job = self._create(cr, spec, out)
                if said:  # once, with the Job: what the Job was made without
                    self.event(cr, "Warning", "SpecWarning", clipped("; ".join(said)), out)
            else:
                job = self._update(cr, spec, job, out)
            if job is not None and queued(cr, spec):
                follow = self._follow(cr, spec, out)
                job, out.admission = follow.step(job)
        except FluxhopError as err:
            out.problem = Problem("Failed", "ApplyFailed", str(err))
        pods: list[dict[str, Any]] = []
        if job is not None and seen is not None:
            pods = seen.pods_of(job)
        elif job is not None:
            pods = self.kube.list("Pod", labels={"batch.kubernetes.io/job-name": name})
        self._report(cr, job, pods, spec.spec.max_nodes, out)
        if follow is not None:
            with contextlib.suppress(FluxhopError):  # refused: the next reconcile finishes it
                follow.finish()  # its Workload, once the last status is written
        return out

    def _follow(self, cr: dict[str, Any], spec: MiniCluster, out: Outcome) -> Follow:
        def event(kind: str, reason: str, message: str) -> None:
            self.event(cr, kind, reason, clipped(message), out)

        return Follow(self.kube, cr, spec, out.writes, event)

    def _marks(self, cr: dict[str, Any], spec: MiniCluster, out: Outcome) -> None:
        """Record on the resource what the CLI needs to find its pods (once)."""
        wanted = {
            OPERATED: FIELD_MANAGER,
            MAX_SIZE: str(spec.spec.max_nodes),
            FLUX_ROOT: spec.spec.flux.container.mount_path,
            CONFIG_DIR: DEFAULT_PATHS.config_dir,
            LEAD_CONTAINER: spec.name,
        }
        current = {**(cr["metadata"].get("annotations") or {}), **self._written.annotations}
        if any(current.get(k) != v for k, v in wanted.items()):
            done = self.kube.merge_patch(
                "MiniCluster", spec.name, {"metadata": {"annotations": wanted}}
            )
            out.writes.append("patch resource annotations")
            out.annotations = wanted
            out.version = str(done["metadata"].get("resourceVersion") or "")

    def _create(self, cr: dict[str, Any], spec: MiniCluster, out: Outcome) -> dict[str, Any]:
        """The children first, then the Job (POST, atomic: of two replicas
        racing at start-up one creates it, the other finds it and updates)."""
        self._marks(cr, spec, out)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            decided = with_lead_volume(
                self.kube,
                operated(spec, self.operator_namespace),
                Target.JOB,
                owner_uid=cr["metadata"].get("uid"),
            )
            decided = self._view_decided(cr, decided, None)
        objects = prepare(decided, Target.JOB, cluster_domain=self.cluster_domain)
        root = objects[-1]
        root["metadata"]["annotations"][CREATED_SIZE] = str(spec.spec.size)
        root["metadata"]["annotations"][RESOURCE_HASH] = resource_hash(spec)
        root["metadata"]["annotations"][CHILDREN] = "first"
        root["metadata"]["ownerReferences"] = [owner_reference(cr)]
        if queued(cr, spec):  # the Workload first: a bad priority class makes nothing
            strip_queue(root)
            workload_for(self.kube, cr, spec, root["spec"]["template"])
        refuse_foreign_claims(self.kube, objects[:-1], cr["metadata"].get("uid"))
        self._children(cr, objects[:-1], out, missing_only=False)
        try:
            job = self.kube.create(root)
        except AlreadyExists:
            current = self.kube.get("Job", spec.name)
            if current is None:
                raise
            return self._update(cr, spec, current, out)
        out.writes.append("create Job")
        self.event(cr, "Normal", "Created", f"created Job {spec.name} and its objects", out)
        for warning in caught:  # once, with the Job: a create refused and retried said nothing
            if warning.category is FluxhopWarning:
                said = str(warning.message)
                reason = "ViewCopied" if said.startswith("spec.flux.container") else "LeadState"
                self.event(cr, "Warning", reason, clipped(said), out)
        return job

    def _update(
        self, cr: dict[str, Any], spec: MiniCluster, job: dict[str, Any], out: Outcome
    ) -> dict[str, Any]:
        self._marks(cr, spec, out)
        annotations = job["metadata"].get("annotations") or {}
        created = int(annotations.get(CREATED_SIZE, job["spec"].get("parallelism", 1)))
        as_created = spec.model_copy(deep=True)
        as_created.spec.size = created
        if self._changed(cr, as_created, job):
            out.problem = Problem(
                "SpecApplied",
                "SpecChangeRefused",
                "the spec changed in a way a running MiniCluster cannot take (only size, within "
                "maxSize, changes in place); delete the MiniCluster and create it again",
            )
            return job
        if annotations.get(CHILDREN) != "first":  # an older operator's Job
            made = self._view_decided(cr, operated(spec, self.operator_namespace), job)
            children = prepare(made, Target.JOB, cluster_domain=self.cluster_domain)[:-1]
            self._children(job, children, out, missing_only=True)
        if not queued(cr, spec) and bool(job["spec"].get("suspend")) != spec.spec.suspend:
            job = self.kube.get("Job", spec.name) or job  # the watch may lag behind our patch
        if not queued(cr, spec) and bool(job["spec"].get("suspend")) != spec.spec.suspend:
            job = self.kube.merge_patch("Job", spec.name, {"spec": {"suspend": spec.spec.suspend}})
            out.writes.append("patch Job suspend")
            held = "held (spec.suspend)" if spec.spec.suspend else "resumed"
            self.event(cr, "Normal", "Suspended" if spec.spec.suspend else "Resumed", held, out)
        if job["spec"].get("parallelism") != spec.spec.size:
            problem = self._resize_problem(cr, spec, job)
            if problem is not None:
                out.problem = Problem("SpecApplied", "ResizeRefused", problem)
                return job
            job = self.kube.merge_patch(
                "Job",
                spec.name,
                {"spec": {"parallelism": spec.spec.size, "completions": spec.spec.size}},
            )
            out.writes.append("patch Job size")
            self.event(cr, "Normal", "Scaled", f"scaled to {spec.spec.size} brokers", out)
        return job

    def _resize_problem(
        self, cr: dict[str, Any], spec: MiniCluster, job: dict[str, Any]
    ) -> str | None:
        """Why the Job may not change size: Kueue's rule for a queued Job, or
        the resource's own (admitted: its Workload holds the quota of the
        size it had); or the Job has ended."""
        problem = Root(Target.JOB, job).resize_problem()
        if problem is None and queued(cr, spec):
            problem = held_size_problem(spec, job) or resize_workload(self.kube, cr, spec.spec.size)
        return problem or ended_resize_problem(spec.name, self._ended(cr, job))

    def _ended(self, cr: dict[str, Any], job: dict[str, Any]) -> str | None:
        """Succeeded or Failed once the Job has ended, or once the resource
        says so (rank 0 exited: its instance is gone before its Job ends)."""
        state = job_state(job)
        status = self._written.status if self._written.status is not None else cr.get("status")
        for condition in (status or {}).get("conditions") or []:
            if condition.get("type") in ("Succeeded", "Failed") and condition["status"] == "True":
                state = state or str(condition["type"])
        return state

    def _changed(self, cr: dict[str, Any], as_created: MiniCluster, job: dict[str, Any]) -> bool:
        """Whether the resource asks for other than its Job was made from (at
        the size it was made with). A Job an operator made before resource
        hashes has only the hash of what it rendered to compare: rendered
        with its view as the Job has it."""
        annotations = job["metadata"].get("annotations") or {}
        recorded = annotations.get(RESOURCE_HASH)
        if recorded is not None:
            return bool(resource_hash(as_created) != recorded)
        rendered = self._view_decided(cr, as_created, job)
        digest = prepare(rendered, Target.JOB, cluster_domain=self.cluster_domain)[-1]
        return bool(digest["metadata"]["annotations"][SPEC_HASH] != annotations.get(SPEC_HASH))

    def _children(
        self,
        owner: dict[str, Any],
        children: list[dict[str, Any]],
        out: Outcome,
        *,
        missing_only: bool,
    ) -> None:
        """Apply the Job's children, owned by ``owner`` (all of them, or with
        ``missing_only`` what an interrupted create left out). The Secret is
        created (POST) only when absent, so the key never changes, even with
        two writers."""
        reference = owner_reference(owner)
        for obj in children:
            if missing_only and self.kube.get(obj["kind"], obj["metadata"]["name"]) is not None:
                continue
            child = copy.deepcopy(obj)
            child["metadata"]["ownerReferences"] = [reference]
            if child["kind"] == "Secret":
                try:
                    self.kube.create(child)
                except AlreadyExists:
                    continue
            else:
                self.kube.apply(child)
            out.writes.append(f"{'apply missing' if missing_only else 'apply'} {obj['kind']}")

    def _output(self, cr: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
        """The end of rank 0's log, once its job has ended (read once: then
        it is on the status). None where it cannot be read (no pod left)."""
        lead = next((p for p in pods if completion_index(p) == 0), None)
        if lead is None:
            return None
        container = (cr["metadata"].get("annotations") or {}).get(LEAD_CONTAINER)
        try:
            lines = list(self.kube.log(lead["metadata"]["name"], container or cr["metadata"]["name"],
                                       tail_lines=OUTPUT_LINES))  # fmt: skip
        except FluxhopError:
            return None
        return output_tail(lines)

    def _report(
        self,
        cr: dict[str, Any],
        job: dict[str, Any] | None,
        pods: list[dict[str, Any]],
        max_size: int,
        out: Outcome,
    ) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        last = self._written.status if self._written.status is not None else cr.get("status")
        # the conditions' transition times come from the last status written,
        # not from a copy that lags behind it (else a new second is a change)
        known = {**cr, "status": last}
        status = resource_status(known, job, pods, max_size=max_size, now=now, problem=out.problem,
                                 admission=out.admission)  # fmt: skip
        output = (last or {}).get(OUTPUT_STATUS)
        if output is None and "exitCode" in status:
            output = self._output(cr, pods)
        if output is not None:
            status[OUTPUT_STATUS] = output
        out.status = status
        # status.autoscale and status.health are the timers' (operator/
        # autoscale_timer.py, health_watch.py): the merge patch below leaves them
        previous = {
            k: v for k, v in (last or {}).items() if k not in (AUTOSCALE_STATUS, HEALTH_STATUS)
        }
        if status == previous:
            return
        before = {c.get("type"): c.get("status") for c in previous.get("conditions") or []}
        done = self.kube.patch_status("MiniCluster", cr["metadata"]["name"], status)
        out.writes.append("patch status")
        out.version = str(done["metadata"].get("resourceVersion") or "")
        for condition in status["conditions"]:
            if before.get(condition["type"]) == condition["status"]:
                continue  # events only on a transition, never on a resync
            failed = condition["type"] == "Failed" and condition["status"] == "True"
            refused = condition["type"] == "SpecApplied" and condition["status"] == "False"
            step = condition["type"] in _STEPS and condition["status"] == "True"
            if failed or refused:
                self.event(cr, "Warning", condition["reason"], condition["message"], out)
            elif step:
                self.event(cr, "Normal", condition["reason"], condition["message"], out)
