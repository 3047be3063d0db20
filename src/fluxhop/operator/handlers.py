"""kopf handlers: every event of a MiniCluster resource - and of the pods of
one - runs the same reconcile (operator/reconcile.py), so the resource's
status follows its brokers without a polling loop. (What Kubernetes events
cannot tell, a MiniCluster's queue and drains inside Flux, is looked at on
timers: operator/timers.py.) The handlers are plain functions (kopf's own
advice): tests call them with a body and a namespace.

Several replicas are safe: kopf's peering (mandatory here) lets one of them
handle resources at a time, the others stand by.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import kopf

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import FluxhopError
from fluxhop.operator import cache, memory
from fluxhop.operator.cache import GROUP, PLURAL, VERSION, Outcome, Seen
from fluxhop.operator.diffbase import OwnDiffBase
from fluxhop.operator.reconcile import Reconciler
from fluxhop.operator.resource import (
    FIELD_MANAGER,
    managed_elsewhere,
    queued_elsewhere,
)
from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.workload.marks import OPERATED
from fluxhop.workload.status import completion_index

__all__ = [
    "GROUP",
    "PEERING",
    "PLURAL",
    "VERSION",
    "configure",
    "on_job",
    "on_minicluster",
    "on_pod",
    "on_queued_elsewhere",
]

PEERING = "fluxhop-operator"
LOG = logging.getLogger("fluxhop.operator")

_clients: dict[str, Kube] = {}
_clients_lock = threading.Lock()


def shared_client(namespace: str) -> Kube:
    """One client per namespace for the operator's life: connecting (reading
    the kubeconfig, a TLS context) costs more than most reconciles do. A
    rotated ServiceAccount token is read again by the client itself."""
    with _clients_lock:
        kube = _clients.get(namespace)
        if kube is None:
            kube = _clients[namespace] = Kube.connect(
                namespace=namespace, field_manager=FIELD_MANAGER
            )
        return kube


# Reconciles of one MiniCluster run one at a time (its resource's handler
# and its pods' and Job's run on kopf's workers side by side), each reading
# the indexes when its turn comes: the last to run saw the last event, so a
# slower reconcile never writes an older status over a newer one. Striped:
# a fixed number of locks, so deleted MiniClusters leave nothing behind.
_STRIPES = [threading.Lock() for _ in range(64)]


def _one_at_a_time(namespace: str, name: str) -> threading.Lock:
    return _STRIPES[zlib.crc32(f"{namespace}/{name}".encode()) % len(_STRIPES)]


# How handlers reach the cluster (tests put the fake API server here) and
# which resources they take (fluxhop operator --selector).
connect: Callable[[str], Kube] = shared_client
selector: dict[str, str] = {}
standalone = False  # fluxhop operator --standalone: one replica, no peering
# The namespace the operator runs in (the downward API's POD_NAMESPACE):
# autoscaled MiniClusters let it read their metrics. None: not in a pod.
own_namespace: str | None = None
# kopf pauses *every* replica when two have the same priority, so each gets
# its own: by default the time it started (ms), so the newest works and the
# others stand by (fluxhop operator --priority overrides).
priority = int(time.time() * 1000) % 2**31


def _selected(labels: Any, body: Any = None, **_: Any) -> bool:
    """The resource is this operator's: its labels match --selector, and
    no other controller keeps it (spec.managedBy)."""
    return all(labels.get(key) == value for key, value in selector.items()) and not (
        body is not None and managed_elsewhere(dict(body))
    )


def _queued_elsewhere(labels: Any, body: Any, **_: Any) -> bool:
    """Another controller keeps the resource, but its Kueue Workload is this
    operator's to make (on_queued_elsewhere)."""
    return all(labels.get(key) == value for key, value in selector.items()) and queued_elsewhere(
        dict(body)
    )


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.peering.name = PEERING
    settings.peering.priority = priority
    if standalone:
        settings.peering.standalone = True
    else:
        settings.peering.mandatory = True  # never two replicas at work at once
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="fluxhop.io")
    settings.persistence.diffbase_storage = OwnDiffBase(
        prefix="fluxhop.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # fluxhop posts its own events
    # each autoscaled MiniCluster's look holds a worker while it waits at rank 0
    # (10 s at most): room for many, so that reconciles never queue behind them
    settings.execution.max_workers = 256


def reconcile_in(namespace: str, body: dict[str, Any], seen: Seen | None = None) -> Outcome:
    kube = connect(namespace)
    return Reconciler(MiniClusters(kube), operator_namespace=own_namespace).reconcile(body, seen)


@kopf.on.resume(GROUP, VERSION, PLURAL, when=_selected)
@kopf.on.create(GROUP, VERSION, PLURAL, when=_selected)
@kopf.on.update(GROUP, VERSION, PLURAL, when=_selected)
def on_minicluster(
    body: Any,
    namespace: str,
    fluxhop_jobs: Any = None,
    fluxhop_pods: Any = None,
    **_: Any,
) -> None:
    """Reconcile the resource (from what the watches have shown: kopf passes
    its indexes); a failure is on its status and in an event."""
    name, uid = body["metadata"]["name"], body["metadata"].get("uid", "")
    try:
        with _one_at_a_time(namespace, name):
            seen = cache.seen(namespace, name, fluxhop_jobs, fluxhop_pods, uid)
            outcome = reconcile_in(namespace, dict(body), seen)
            cache.remember(body, outcome)
    except FluxhopError as err:  # the API refused us: try again later (kopf backs off)
        raise kopf.TemporaryError(str(err), delay=10) from None
    if outcome.writes:
        LOG.info("MiniCluster %s/%s: %s", namespace, name, ", ".join(outcome.writes))


@kopf.on.event(GROUP, VERSION, PLURAL, when=_queued_elsewhere)
def on_queued_elsewhere(body: Any, namespace: str, type: str | None = None, **_: Any) -> None:
    """A resource another controller runs (Kueue's MultiKueue), with a
    queue: its Workload, and nothing else. An event handler, not a create
    handler: kopf then writes nothing on the resource, which MultiKueue
    copies to a worker cluster as it is."""
    if type == "DELETED":
        return
    name = body["metadata"]["name"]
    try:
        with _one_at_a_time(namespace, name):
            outcome = reconcile_in(namespace, dict(body))
    except FluxhopError as err:  # the API refused us: the next event tries again
        LOG.warning("MiniCluster %s/%s: its Workload: %s", namespace, name, err)
        return
    if outcome.writes:
        LOG.info("MiniCluster %s/%s: %s", namespace, name, ", ".join(outcome.writes))


def _remember_lead(pod: dict[str, Any], namespace: str, name: str, event: str | None) -> None:
    if completion_index(pod) != 0:
        return
    key = (namespace, name)
    current = memory.leads.get(key)
    if event == "DELETED":
        if current and current["metadata"].get("uid") == pod["metadata"].get("uid"):
            # rank 0 gone (a restart, or the MiniCluster deleted): forget what
            # the looks kept for it, so that deleted MiniClusters leave nothing
            memory.forget(key)
        return
    created = pod["metadata"].get("creationTimestamp") or ""
    if current is None or created >= (current["metadata"].get("creationTimestamp") or ""):
        memory.leads[key] = pod


@kopf.on.event("", "v1", "pods", labels={MINICLUSTER_LABEL: kopf.PRESENT})
def on_pod(
    body: Any,
    namespace: str,
    type: str | None = None,
    miniclusters: Any = None,
    fluxhop_jobs: Any = None,
    fluxhop_pods: Any = None,
    **_: Any,
) -> None:
    """A broker pod changed: bring its MiniCluster resource's status up to date."""
    name = body["metadata"]["labels"][MINICLUSTER_LABEL]
    _remember_lead(dict(body), namespace, name, type)
    if type is None:
        return  # the listing at start: the resource's own resume handler reconciles it
    _follow(namespace, name, miniclusters, fluxhop_jobs, fluxhop_pods, job_event=False)


@kopf.on.event("batch", "v1", "jobs", labels={MINICLUSTER_LABEL: kopf.PRESENT})
@kopf.on.event("kueue.x-k8s.io", "v1beta2", "workloads", labels={MINICLUSTER_LABEL: kopf.PRESENT})
def on_job(
    body: Any,
    namespace: str,
    type: str | None = None,
    miniclusters: Any = None,
    fluxhop_jobs: Any = None,
    fluxhop_pods: Any = None,
    resource: Any = None,
    **_: Any,
) -> None:
    """A MiniCluster's Job changed (it finished, or someone deleted it): the
    same, and a deleted Job is made again. So for a queued one's Workload,
    on which Kueue decides (admits it, evicts it); where Kueue is not
    installed kopf serves no Workloads."""
    if type is None:
        return  # the listing at start: the resource's own resume handler reconciles it
    name = body["metadata"]["labels"][MINICLUSTER_LABEL]
    job_event = resource is None or resource.plural == "jobs"
    _follow(namespace, name, miniclusters, fluxhop_jobs, fluxhop_pods, job_event=job_event)


def _follow(
    namespace: str, name: str, index: Any, jobs: Any, pods: Any, *, job_event: bool
) -> None:
    """Reconcile MiniCluster resource ``name`` after an event of its objects,
    if this operator keeps it (not a Job fluxhop create made, nor one of the
    Flux Operator's)."""
    kube = connect(namespace)
    try:
        with _one_at_a_time(namespace, name):
            cr = cache.resource(namespace, name, index) if index is not None else None
            if index is None:  # no index passed (a test): ask the API server
                cr = kube.get("MiniCluster", name)
            if cr is None:
                cache.forget(namespace, name)
                return
            if queued_elsewhere(cr):  # a MultiKueue manager's: Kueue changed its Workload
                if _queued_elsewhere(cr["metadata"].get("labels") or {}, cr):
                    reconcile_in(namespace, cr)
                return
            seen = cache.seen(namespace, name, jobs, pods, cr["metadata"].get("uid", ""))
            if seen is not None and seen.job is None and not job_event:
                return  # the Job's watch is behind, or the Job is gone: its event reconciles
            if cr["metadata"].get("deletionTimestamp") or not _operated(cr, seen):
                return  # going (its Job going with it is not to be made again), or not ours
            if not _selected(cr["metadata"].get("labels") or {}, cr):
                return
            reconciler = Reconciler(MiniClusters(kube), operator_namespace=own_namespace)
            cache.remember(cr, reconciler.reconcile(cr, seen))
    except FluxhopError as err:
        LOG.warning("MiniCluster %s/%s: %s", namespace, name, err)


def _operated(cr: dict[str, Any], seen: Seen | None) -> bool:
    """Whether this operator keeps ``cr``: it has marked it, or (the watch of
    the resource is behind its first reconcile, still running) made its Job."""
    if OPERATED in (cr["metadata"].get("annotations") or {}):
        return True
    job = seen.job if seen is not None else None
    uid = cr["metadata"].get("uid")
    return job is not None and any(
        owner.get("uid") == uid and owner.get("kind") == "MiniCluster"
        for owner in job["metadata"].get("ownerReferences") or []
    )
