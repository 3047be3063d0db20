"""kopf handlers: every event of a MiniCluster resource - and of the pods of
one - runs the same reconcile (operator/reconcile.py), so the resource's
status follows its brokers without a polling loop. The handlers are plain
functions (kopf's own advice): tests call them with a body and a namespace.

Several replicas are safe: kopf's peering (mandatory here) lets one of them
handle resources at a time, the others stand by.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import kopf

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import FluxhopError
from fluxhop.operator.reconcile import FIELD_MANAGER, Outcome, Reconciler
from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.workload.marks import OPERATED

__all__ = ["GROUP", "PEERING", "PLURAL", "VERSION", "configure", "on_minicluster", "on_pod"]

GROUP, VERSION, PLURAL = "flux-framework.org", "v1alpha2", "miniclusters"
PEERING = "fluxhop-operator"
LOG = logging.getLogger("fluxhop.operator")

# How handlers reach the cluster (tests put the fake API server here) and
# which resources they take (fluxhop operator --selector).
connect: Callable[[str], Kube] = lambda namespace: Kube.connect(  # noqa: E731
    namespace=namespace, field_manager=FIELD_MANAGER
)
selector: dict[str, str] = {}
standalone = False  # fluxhop operator --standalone: one replica, no peering
# kopf pauses *every* replica when two have the same priority, so each gets
# its own: by default the time it started (ms), so the newest works and the
# others stand by (fluxhop operator --priority overrides).
priority = int(time.time() * 1000) % 2**31


def _selected(labels: Any, **_: Any) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.peering.name = PEERING
    settings.peering.priority = priority
    if standalone:
        settings.peering.standalone = True
    else:
        settings.peering.mandatory = True  # never two replicas at work at once
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="fluxhop.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="fluxhop.io", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # fluxhop posts its own events


def reconcile_in(namespace: str, body: dict[str, Any]) -> Outcome:
    kube = connect(namespace)
    try:
        return Reconciler(MiniClusters(kube)).reconcile(body)
    finally:
        kube.close()


@kopf.on.resume(GROUP, VERSION, PLURAL, when=_selected)
@kopf.on.create(GROUP, VERSION, PLURAL, when=_selected)
@kopf.on.update(GROUP, VERSION, PLURAL, when=_selected)
def on_minicluster(body: Any, namespace: str, **_: Any) -> None:
    """Reconcile the resource; a failure is on its status and in an event."""
    try:
        outcome = reconcile_in(namespace, dict(body))
    except FluxhopError as err:  # the API refused us: try again later (kopf backs off)
        raise kopf.TemporaryError(str(err), delay=10) from None
    if outcome.writes:
        LOG.info(
            "MiniCluster %s/%s: %s", namespace, body["metadata"]["name"], ", ".join(outcome.writes)
        )


@kopf.on.event("", "v1", "pods", labels={MINICLUSTER_LABEL: kopf.PRESENT})
def on_pod(body: Any, namespace: str, **_: Any) -> None:
    """A broker pod changed: bring its MiniCluster resource's status up to date."""
    name = body["metadata"]["labels"][MINICLUSTER_LABEL]
    kube = connect(namespace)
    try:
        cr = kube.get("MiniCluster", name)
        if cr is None or OPERATED not in (cr["metadata"].get("annotations") or {}):
            return  # not one of ours: a Job fluxhop create made, or the Flux Operator's
        if not _selected(cr["metadata"].get("labels") or {}):
            return
        Reconciler(MiniClusters(kube)).reconcile(cr)
    except FluxhopError as err:
        LOG.warning("MiniCluster %s/%s: %s", namespace, name, err)
    finally:
        kube.close()
