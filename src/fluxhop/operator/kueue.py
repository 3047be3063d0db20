"""fluxhop operator as Kueue's job controller for a queued MiniCluster
resource (``kueue.x-k8s.io/queue-name`` on it, or in ``spec.jobLabels``).

Kueue admits a ``Workload`` whatever owns it; for its own kinds its job
framework makes that Workload and acts on Kueue's decisions. Kueue knows no
MiniCluster, so this module does that part (the Workload:
render/kueue_workload.py; reading Kueue's decisions:
workload/kueue_admission.py):

* the Workload is made before anything else, owned by the resource; a bad
  priority class fails the create with nothing made;
* the MiniCluster is held until Kueue admits it: its Job is made suspended,
  without Kueue's labels (Kueue's Job integration would queue it a second
  time), and ``spec.suspend`` on the resource says so;
* admitted: the Job's pods get the admission's node labels and tolerations,
  and the Job runs (``spec.suspend: false``);
* evicted (preempted, deactivated...): the Job is suspended again (its pods
  go), its pod template put back, and once no pod is left the quota is
  released, with the reason on the resource's status and in an event;
* ended: the Workload is finished, so its quota frees.

A MiniCluster that MultiKueue copied to this cluster carries the name of the
Workload MultiKueue made for it here (``kueue.x-k8s.io/prebuilt-workload-name``):
that one is adopted, not made. A Job an older operator queued through Kueue's
Job integration (the queue label on the Job) is left to Kueue.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import AlreadyExists, ClusterError, SpecError
from fluxhop.operator.status import Admission
from fluxhop.render.kueue_workload import PRIORITY_LABEL, Priority, kueue_workload, workload_name
from fluxhop.render.objects import MINICLUSTER_LABEL, owner_reference
from fluxhop.spec.kueue import KUEUE_JOB_UID, KUEUE_PREFIX, QUEUE_LABEL, queue_of, resize_problem
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.kueue_admission import (
    PODSET_LABEL,
    Decision,
    decision,
    finished_status,
    pod_set_info,
    released_status,
    restored,
    started,
    template_patch,
)
from fluxhop.workload.status import job_state

__all__ = [
    "PREBUILT",
    "Follow",
    "held_size_problem",
    "queued",
    "resize_workload",
    "strip_queue",
    "workload_for",
]

PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"  # MultiKueue's, on a copied resource


def labels_of(cr: dict[str, Any]) -> dict[str, str]:
    return dict(cr["metadata"].get("labels") or {})


def queued(cr: dict[str, Any], spec: MiniCluster) -> bool:
    return bool(queue_of(spec)) or PREBUILT in (cr["metadata"].get("labels") or {})


def strip_queue(job: dict[str, Any]) -> None:
    """Kueue's labels off the Job a queued resource runs in: the resource is
    the Kueue workload, and a Job with a queue label would be another."""
    labels = job["metadata"].get("labels") or {}
    job["metadata"]["labels"] = {k: v for k, v in labels.items() if not k.startswith(KUEUE_PREFIX)}
    job["spec"]["suspend"] = True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _priority(kube: Kube, spec: MiniCluster, cr: dict[str, Any]) -> Priority | None:
    """The Workload's priority, from a WorkloadPriorityClass the resource
    names (Kueue's label; the CRD has no pod priorityClassName)."""
    labels = {**(cr["metadata"].get("labels") or {}), **spec.spec.job_labels}
    name = labels.get(PRIORITY_LABEL)
    if not name:
        return None
    found = kube.get("WorkloadPriorityClass", name)
    if found is None:
        raise SpecError(f"WorkloadPriorityClass {name} does not exist; create it, or name another")
    return Priority(name, int(found.get("value") or 0))


def _name(cr: dict[str, Any]) -> str:
    meta = cr["metadata"]
    return (meta.get("labels") or {}).get(PREBUILT) or workload_name(meta["name"], meta["uid"])


def workload_for(kube: Kube, cr: dict[str, Any], spec: MiniCluster,
                 template: dict[str, Any]) -> dict[str, Any] | None:  # fmt: skip
    """The resource's Workload, made if it is not there (None: MultiKueue's,
    not made yet); a prebuilt one is adopted."""
    name = _name(cr)
    found = kube.get("Workload", name)
    if PREBUILT in (cr["metadata"].get("labels") or {}):
        return None if found is None else _adopt(kube, cr, found)
    if found is not None:
        return found
    made = kueue_workload(spec, template, cr, priority=_priority(kube, spec, cr), name=name)
    try:
        return kube.create(made)
    except AlreadyExists:
        return kube.get("Workload", name)


def _adopt(kube: Kube, cr: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any] | None:
    """MultiKueue's Workload, made ours as Kueue's job framework adopts a
    prebuilt one: our controller reference and uid label (another
    controller's Workload is not taken: None)."""
    uid = cr["metadata"]["uid"]
    owners = workload["metadata"].get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    if controller is not None:
        return workload if controller.get("uid") == uid else None
    labels = {KUEUE_JOB_UID: uid, MINICLUSTER_LABEL: cr["metadata"]["name"]}
    try:
        return kube.merge_patch("Workload", workload["metadata"]["name"], {"metadata": {
            "labels": labels, "ownerReferences": [*owners, owner_reference(cr)],
            "resourceVersion": workload["metadata"]["resourceVersion"]}})  # fmt: skip
    except AlreadyExists:  # changed since it was read: the next reconcile adopts it
        return None


def held_size_problem(spec: MiniCluster, job: dict[str, Any]) -> str | None:
    """Why a queued resource may not change size now: admitted, its Workload
    holds the quota of the size it has (Kueue would stop and queue again a
    Job of its own for it; no elastic Workload here, whatever annotation)."""
    queue = queue_of(spec)
    if not queue:
        return None
    admitted = not job["spec"].get("suspend")
    return resize_problem(spec.name, queue, admitted=admitted, annotations={})


def resize_workload(kube: Kube, cr: dict[str, Any], size: int) -> str | None:
    """A queued resource not admitted yet changes size in its Workload too
    (Kueue lets a Workload without quota change); one holding quota may
    not: why, or None once changed."""
    workload = kube.get("Workload", _name(cr))
    if workload is None:
        return None
    if decision(workload).quota_reserved:
        name = cr["metadata"]["name"]
        return (f"MiniCluster {name} holds quota for its size in Workload "
                f"{workload['metadata']['name']}; delete it and create it with the new size")  # fmt: skip
    sets = copy.deepcopy(workload["spec"]["podSets"])
    sets[0]["count"] = size
    version = workload["metadata"]["resourceVersion"]
    try:  # as of the version read: Kueue may reserve quota for it meanwhile
        kube.merge_patch("Workload", workload["metadata"]["name"],
                         {"metadata": {"resourceVersion": version}, "spec": {"podSets": sets}})  # fmt: skip
    except (AlreadyExists, ClusterError) as err:
        return f"MiniCluster {cr['metadata']['name']}: Kueue changed its Workload meanwhile ({err}); try again"
    return None


class Follow:
    """One reconcile's part of Kueue's contract for a resource and its Job:
    ``step`` acts on Kueue's decision and says what to report."""

    def __init__(self, kube: Kube, cr: dict[str, Any], spec: MiniCluster, writes: list[str],
                 event: Any) -> None:  # fmt: skip
        self.kube, self.cr, self.spec = kube, cr, spec
        self.writes = writes
        self.event = event  # (kind, reason, message) -> None
        # the Workload to finish once the resource's last status is written
        # (MultiKueue copies a status back until the Workload is finished)
        self.ending: tuple[dict[str, Any], str] | None = None

    def step(self, job: dict[str, Any]) -> tuple[dict[str, Any], Admission | None]:
        labels = job["metadata"].get("labels") or {}
        if QUEUE_LABEL in labels:
            return job, None  # an older operator's: Kueue's Job integration keeps it
        template = job["spec"]["template"]
        original = copy.deepcopy(template)
        original["metadata"].get("labels", {}).pop(PODSET_LABEL, None)
        workload = workload_for(self.kube, self.cr, self.spec, original)
        if workload is None:
            self._hold(job)
            name = _name(self.cr)
            return job, Admission(False, "WorkloadMissing", f"waiting for Workload {name}")
        said = decision(workload)
        counts = [pod_set.get("count") for pod_set in workload["spec"].get("podSets") or []]
        if PREBUILT in labels_of(self.cr) and not said.finished and counts != [self.spec.spec.size]:
            # MultiKueue's copy of a Workload made for another size (the manager's
            # resource resized after it): as Kueue ends a prebuilt one out of sync
            self._finish(workload, "Failed", f"the Workload asks for {counts} pods, the "
                         f"MiniCluster for {self.spec.spec.size}", reason="OutOfSync")  # fmt: skip
            self._hold(job)
            return job, Admission(False, "OutOfSync", "its Workload is for another size")
        ended = job_state(job)
        if ended is not None:
            if not said.finished:
                self.ending = (workload, ended)
            return job, Admission(said.admitted, "Finished", f"the MiniCluster {ended.lower()}")
        if said.finished:  # before it ran (it could not start, or was out of sync)
            job = self._stop(job, workload, said)
            reason, message = said.finished_as
            return job, Admission(False, reason or "Finished", message or "Kueue finished it")
        if said.admitted and said.evicted is None and said.active:
            job = self._start(job, workload)
            queue = (workload.get("status") or {}).get("admission", {}).get("clusterQueue", "")
            return job, Admission(True, "Admitted", f"admitted by ClusterQueue {queue}")
        job = self._stop(job, workload, said)
        reason, message = said.evicted or ("Pending", said.waiting or "waiting for admission")
        return job, Admission(False, reason, message)

    def finish(self) -> None:
        """Finish the Workload of a MiniCluster that has ended: after its last
        status is written, which MultiKueue copies back to a manager until
        then (it deletes the worker's copy once the Workload is finished)."""
        if self.ending is not None:
            workload, ended = self.ending
            self._finish(workload, ended)
            self.ending = None

    def _hold(self, job: dict[str, Any]) -> None:
        if not (self.cr.get("spec") or {}).get("suspend"):
            self.kube.merge_patch("MiniCluster", self.spec.name, {"spec": {"suspend": True}})
            self.writes.append("patch resource suspend")

    def _fresh(self, job: dict[str, Any]) -> dict[str, Any]:
        """The Job as it is now: the watch's copy may not have brought this
        operator's own last start or stop yet (one GET, only when acting)."""
        return self.kube.get("Job", self.spec.name) or job

    def _start(self, job: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
        if not job["spec"].get("suspend"):
            return job
        job = self._fresh(job)
        if not job["spec"].get("suspend"):
            return job
        flavors = {}
        assignments = ((workload.get("status") or {}).get("admission") or {}).get(
            "podSetAssignments") or []  # fmt: skip
        for name in {f for a in assignments for f in (a.get("flavors") or {}).values()}:
            flavors[name] = self.kube.get("ResourceFlavor", name) or {}
        current = job["spec"]["template"]
        try:
            patch = template_patch(current, started(current, pod_set_info(workload, flavors)))
        except ValueError as err:  # as Kueue ends a job it cannot start
            self._finish(workload, "Failed", f"cannot start: {err}", reason="FailedToStart")
            return job
        if patch:  # a suspended Job's scheduling directives may change, then it runs
            self.kube.merge_patch("Job", self.spec.name, {"spec": {"template": patch}})
        job = self.kube.merge_patch("Job", self.spec.name, {"spec": {"suspend": False}})
        self.writes.append("start Job")
        if (self.cr.get("spec") or {}).get("suspend"):
            self.kube.merge_patch("MiniCluster", self.spec.name, {"spec": {"suspend": False}})
            self.writes.append("patch resource suspend")
        queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        self.event("Normal", "Admitted", f"admitted by ClusterQueue {queue}")
        return job

    def _stop(
        self, job: dict[str, Any], workload: dict[str, Any], said: Decision
    ) -> dict[str, Any]:
        """Hold the Job; once its pods are gone, put its template back and
        give back the quota of an evicted Workload."""
        self._hold(job)
        if not job["spec"].get("suspend"):
            job = self._fresh(job)
        if not job["spec"].get("suspend"):
            job = self.kube.merge_patch("Job", self.spec.name, {"spec": {"suspend": True}})
            self.writes.append("suspend Job")
            reason, message = said.evicted or ("Evicted", "Kueue took the admission back")
            self.event("Warning", reason, f"suspended: {message}")
            return job
        (pod_set,) = workload["spec"]["podSets"][:1]
        releasing = said.evicted is not None and said.quota_reserved
        if not releasing and not template_patch(
            job["spec"]["template"], restored(job["spec"]["template"], pod_set["template"])
        ):
            return job  # nothing to do (and no GET): waiting, as it was made
        job = self._fresh(job)  # not the watch's copy: its pods may still run
        status = job.get("status") or {}
        if status.get("active") or status.get("terminating") or not job["spec"].get("suspend"):
            return job  # its pods are still going: the Job's events bring the next step
        current = job["spec"]["template"]
        patch = template_patch(current, restored(current, pod_set["template"]))
        if patch:
            job = self.kube.merge_patch("Job", self.spec.name, {"spec": {"template": patch}})
            self.writes.append("restore Job template")
        if said.evicted is not None and said.quota_reserved:
            self._status(workload, released_status(workload, _now()), "release Workload quota")
        return job

    def _finish(self, workload: dict[str, Any], ended: str, message: str = "",
                reason: str | None = None) -> None:  # fmt: skip
        succeeded = ended == "Succeeded"
        message = message or (
            "rank 0 exited with code 0" if succeeded else "the MiniCluster failed"
        )
        patch = finished_status(workload, _now(), succeeded=succeeded, message=message,
                                reason=reason)  # fmt: skip
        self._status(workload, patch, "finish Workload")

    def _status(self, workload: dict[str, Any], patch: dict[str, Any], what: str) -> None:
        """Patch the Workload's status as of the version read: if Kueue has
        changed it since (409), nothing is written, and Kueue's change brings
        a reconcile that decides again."""
        try:
            self.kube.patch_status("Workload", workload["metadata"]["name"], patch["status"],
                                   version=patch["metadata"]["resourceVersion"])  # fmt: skip
        except AlreadyExists:
            return
        self.writes.append(what)
