"""A queued MiniCluster that another controller runs - Kueue's MultiKueue,
which copies it to a worker cluster, where a fluxhop operator runs it - as
the manager's fluxhop operator keeps it: its Workload and nothing else made
here. The resource's status is MultiKueue's copy of the worker's, with one
exception: MultiKueue never takes that copy back. When the worker's copy is
evicted (preempted there, the worker lost) the manager's status would go on
saying Ready or Running while the MiniCluster waits in the queue again; the
job controller's part, as Kueue's own Job controller plays it, is to say it
waits, so it is said here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import AlreadyExists, SpecError
from fluxhop.operator.kueue import workload_for
from fluxhop.operator.resource import operated, read_spec
from fluxhop.operator.status import Admission, resource_status
from fluxhop.render.kueue_workload import workload_name
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.kueue_admission import Decision, decision, released_status
from fluxhop.workload.marks import prepare

__all__ = ["reconcile_dispatched"]

_CLAIMS = ("Ready", "Running")  # what a status copied from a worker says of pods there


def reconcile_dispatched(
    kube: Kube, cr: dict[str, Any], *, operator_namespace: str | None, cluster_domain: str
) -> list[str]:
    """Bring a dispatched resource's Workload (and, once it is evicted, its
    status) to what Kueue says; what was written, in words. A spec fluxhop
    cannot render has no Workload (and nothing said: not fluxhop's resource
    to report on)."""
    try:
        spec = read_spec(cr, kube.namespace)[0]
    except SpecError:
        return []
    name = workload_name(spec.name, cr["metadata"]["uid"])
    found = kube.get("Workload", name)
    if found is None:
        here = spec.model_copy(deep=True)
        here.spec.managed_by = None  # rendered as if it were run here, for its pods' shape
        template = prepare(operated(here, operator_namespace), Target.JOB,
                           cluster_domain=cluster_domain)[-1]["spec"]["template"]  # fmt: skip
        workload_for(kube, cr, here, template)
        return ["create Workload"]
    said = decision(found)
    return _release(kube, found, said) + _waiting_again(kube, cr, spec, said)


def _release(kube: Kube, workload: dict[str, Any], said: Decision) -> list[str]:
    """Evicted (a worker evicted its copy, a worker was lost, a preemption):
    as a job controller does, give back the quota (there are no pods here),
    so that Kueue can dispatch it again."""
    if said.evicted is None or not said.quota_reserved or said.finished:
        return []
    try:
        patch = released_status(workload, _now())
        kube.patch_status("Workload", workload["metadata"]["name"], patch["status"],
                          version=patch["metadata"]["resourceVersion"])  # fmt: skip
    except AlreadyExists:  # Kueue changed it since: its event brings another look
        return []
    return ["release Workload quota"]


def _waiting_again(kube: Kube, cr: dict[str, Any], spec: MiniCluster, said: Decision) -> list[str]:
    """The status of a resource that holds no admission (evicted, or queued
    again) but still says what its worker's copy said: it waits, in Kueue's
    words; what the worker reported (its exit code, output, health) goes."""
    holds = said.quota_reserved and said.evicted is None
    last = cr.get("status") or {}
    claims = any(
        c.get("type") in _CLAIMS and c.get("status") == "True" for c in last.get("conditions") or []
    )
    if holds or said.finished or not claims:
        return []
    reason, message = said.evicted or ("Pending", said.waiting or "waiting for admission")
    status: dict[str, Any] = resource_status(cr, None, [], max_size=spec.spec.max_nodes,
                                             now=_now(), admission=Admission(False, reason, message))  # fmt: skip
    status.update({key: None for key in last if key not in status})  # a merge patch drops them
    kube.patch_status("MiniCluster", cr["metadata"]["name"], status)
    return ["status waiting again"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
