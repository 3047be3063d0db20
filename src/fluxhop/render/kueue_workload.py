"""The Kueue ``Workload`` of a queued MiniCluster resource: what fluxhop
operator asks Kueue to admit, as Kueue's own integrations make one for a
Job. Kueue knows no MiniCluster (no Go type of it), so the operator plays
Kueue's job-framework part for it: it makes this Workload, owned by the
resource (a controller reference, as Kueue's ``SetControllerReference``),
holds the MiniCluster until Kueue admits it, and reports its end.

One pod set per broker shape: every broker of a MiniCluster runs the same
pod template, so one pod set of ``size`` pods, named ``brokers``. Its
template is the Job's pod template as rendered, whose requests are what
Kueue counts against the quota; it is also what an evicted MiniCluster's
pods are put back to (Kueue keeps the originals there for the same reason).
Its topology request is the one Kueue's Job integration makes: the pods'
``podset-required-topology`` or ``-preferred-topology`` annotation, and the
completion index as the pod index, so that topology-aware scheduling places
ranks in order.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.render.objects import MINICLUSTER_LABEL, owner_reference
from fluxhop.spec.kueue import KUEUE_JOB_UID, KUEUE_PREFIX, queue_of, topology_of
from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "POD_SET",
    "PRIORITY_LABEL",
    "WORKLOAD_API",
    "Priority",
    "kueue_workload",
    "workload_name",
]

WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
POD_SET = "brokers"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"  # a WorkloadPriorityClass, Kueue's own
POD_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # the Job controller's, on each pod
_MAX_NAME = 253


@dataclass(frozen=True)
class Priority:
    """The WorkloadPriorityClass a Workload's priority comes from, and its
    value (read from the cluster: a Workload carries both, as Kueue's
    integrations write it)."""

    name: str
    value: int

    def reference(self) -> dict[str, str]:
        return {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": self.name}


def workload_name(name: str, uid: str, kind: str = "MiniCluster") -> str:
    """``minicluster-<name>-<5 hex>``, the shape of Kueue's own names
    (``GetWorkloadNameForOwnerWithGVK``): the hash of the owner's uid tells a
    Workload of an earlier resource of the same name from this one's."""
    digest = hashlib.sha1(f"{kind}\nflux-framework.org\n{name}\n{uid}".encode()).hexdigest()
    prefix = f"{kind.lower()}-{name}"[: _MAX_NAME - 6]
    return f"{prefix}-{digest[:5]}"


def _template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod set's template: a Workload's template metadata holds labels
    and annotations only (Kueue's CRD)."""
    meta = pod.get("metadata") or {}
    kept = {key: dict(meta[key]) for key in ("labels", "annotations") if meta.get(key)}
    return {"metadata": kept, "spec": copy.deepcopy(pod["spec"])}


def _topology_request(spec: MiniCluster) -> dict[str, str]:
    request = {"podIndexLabel": POD_INDEX_LABEL}
    topology = topology_of(spec)
    if topology is not None:
        level, required = topology
        request["required" if required else "preferred"] = level
    return request


def kueue_workload(
    spec: MiniCluster,
    pod_template: Mapping[str, Any],
    owner: Mapping[str, Any],
    *,
    priority: Priority | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """The Workload that queues ``spec`` (which must name a queue), owned by
    resource ``owner`` (read back from the API server: it has a uid)."""
    queue = queue_of(spec)
    if not queue:
        raise ValueError(f"MiniCluster {spec.name} names no queue")
    meta = owner["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k.startswith(KUEUE_PREFIX)}
    labels.pop("kueue.x-k8s.io/queue-name", None)
    labels |= {KUEUE_JOB_UID: meta["uid"], MINICLUSTER_LABEL: spec.name}
    body: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": POD_SET,
                "count": spec.spec.size,
                "template": _template(pod_template),
                "topologyRequest": _topology_request(spec),
            }
        ],
    }
    if priority is not None:
        body["priorityClassRef"] = priority.reference()
        body["priority"] = priority.value
    return {
        "apiVersion": WORKLOAD_API,
        "kind": "Workload",
        "metadata": {
            "name": name or workload_name(spec.name, meta["uid"]),
            "namespace": spec.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": body,
    }
