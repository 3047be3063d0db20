"""The MiniCluster resource as fluxhop operator reads it and speaks on
it: its spec (as a file would say it, in the namespace it lives in), what
it asks for (``resource_hash``), what the operator renders for it
(``operated``), whether another controller keeps it (``spec.managedBy``),
and the events posted on it. Its field manager and status sections are
named here, for every part of the operator that writes them."""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
import warnings
from datetime import UTC, datetime
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopWarning
from fluxhop.spec.kueue import QUEUE_LABEL
from fluxhop.spec.minicluster import FLUXHOP_OPERATOR, Metadata, MiniCluster
from fluxhop.spec.rules import managed_by_problem

__all__ = [
    "AUTOSCALE_STATUS",
    "FIELD_MANAGER",
    "HEALTH_STATUS",
    "OUTPUT_STATUS",
    "document",
    "managed_elsewhere",
    "operated",
    "post_event",
    "queued_elsewhere",
    "read_spec",
    "resource_hash",
    "spec_of",
]

FIELD_MANAGER = "fluxhop-operator"
AUTOSCALE_STATUS = "autoscale"  # status.autoscale: the autoscaler's decisions
HEALTH_STATUS = "health"  # the health look's (operator/health_watch.py)
OUTPUT_STATUS = "output"  # the end of rank 0's log, once its job ended
_SERVER_FIELDS = tuple(Metadata.UNSUPPORTED)  # set by the API server


def resource_hash(spec: MiniCluster) -> str:
    """What the resource asks for, whatever this fluxhop renders for it: the
    operator compares this, not the rendered objects, so that upgrading it
    (which may render differently) does not make every running MiniCluster
    look changed. Secret fields take part only as the model masks them."""
    doc = spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    doc.get("spec", {}).pop("suspend", None)  # holding it is no change of what it is
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def operated(spec: MiniCluster, operator_namespace: str | None = None) -> MiniCluster:
    """What the operator renders: a MiniCluster it keeps serves its metrics
    unless its resource says ``metrics.enabled: false``, and one that
    autoscales or has health checks lets the operator's namespace read them
    (the resource hash is taken of the resource as written, not of this)."""
    served = spec.model_copy(deep=True)
    metrics = served.spec.metrics
    if metrics.enabled is None:
        metrics.enabled = True
    looked_at = spec.spec.autoscale is not None or spec.spec.health is not None
    reader = operator_namespace if looked_at and metrics.enabled else None
    if reader and reader != spec.namespace and reader not in metrics.namespaces:
        metrics.namespaces = [*metrics.namespaces, reader]
    return served


def document(cr: dict[str, Any]) -> dict[str, Any]:
    """The resource as a MiniCluster file would say it (no status, no server fields)."""
    doc = {key: copy.deepcopy(value) for key, value in cr.items() if key != "status"}
    meta = doc.get("metadata") or {}
    doc["metadata"] = {
        k: v for k, v in meta.items() if k not in _SERVER_FIELDS and k != "annotations"
    }
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if not k.startswith("fluxhop.io/")
        and k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    if annotations:
        doc["metadata"]["annotations"] = annotations
    return doc


def post_event(kube: Kube, cr: dict[str, Any], kind: str, reason: str, message: str) -> None:
    """An event on MiniCluster resource ``cr`` (kind Normal or Warning)."""
    meta = cr["metadata"]
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}"},
            "involvedObject": {
                "apiVersion": cr["apiVersion"],
                "kind": "MiniCluster",
                "name": meta["name"],
                "namespace": kube.namespace,
                "uid": meta.get("uid", ""),
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": FIELD_MANAGER},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
    )


def read_spec(cr: dict[str, Any], namespace: str) -> tuple[MiniCluster, list[str]]:
    """The resource's MiniCluster, in the namespace it lives in, and its
    warnings (e.g. a Flux Operator field fluxhop leaves out), which only an
    event can tell the user of a resource; raises SpecError, one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = MiniCluster.from_dict(document(cr))
    said = list(dict.fromkeys(str(w.message) for w in caught if w.category is FluxhopWarning))
    spec = spec if spec.namespace == namespace else spec.renamed(namespace=namespace)
    return spec, said


def managed_elsewhere(cr: dict[str, Any]) -> bool:
    """The resource's spec.managedBy names a controller other than fluxhop
    operator (e.g. Kueue's MultiKueue, which runs it on another cluster): the
    resource is left alone, read as it is written, valid or not. A value
    that names no controller (not a domain-prefixed path) is fluxhop's to
    refuse: it ends Failed (InvalidSpec) rather than nobody's."""
    manager = (cr.get("spec") or {}).get("managedBy")
    if not isinstance(manager, str) or managed_by_problem(manager):
        return False
    return manager != FLUXHOP_OPERATOR


def queued_elsewhere(cr: dict[str, Any]) -> bool:
    """Another controller's resource with a Kueue queue (on it, or in
    spec.jobLabels): its Workload is fluxhop operator's to make."""
    labels = {
        **(cr["metadata"].get("labels") or {}),
        **((cr.get("spec") or {}).get("jobLabels") or {}),
    }
    return managed_elsewhere(cr) and bool(labels.get(QUEUE_LABEL))


def spec_of(cr: dict[str, Any], namespace: str) -> MiniCluster:
    """The resource's MiniCluster, in the namespace it lives in; raises
    SpecError, one line."""
    return read_spec(cr, namespace)[0]
