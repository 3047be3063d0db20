"""What spec.leadState needs of a cluster, found by the API server's
admission for a user who may not read cluster-wide objects (a namespace's
user, as a rule: Kubernetes' ``edit`` role reads no StorageClass and no
admission policy). Each probe is a dry-run create, which runs admission
and stores nothing:

* a pod shaped as the Job makes rank 0's comes back with the claim mounted
  where deploy/lead-state.yaml's policy is in force for this namespace;
* a claim that names no class comes back with the default StorageClass
  (the DefaultStorageClass admission plugin), by name only.

A dry run refused (no right to create pods, a quota, Pod Security, a
webhook that takes no dry runs) leaves the answer unknown, with the API
server's words for why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import ClusterError
from fluxhop.render.pod import LEAD_CLAIM_ANNOTATION, LEAD_CONTAINER_ANNOTATION, LEAD_STATE_VOLUME
from fluxhop.spec.leadstate import DEFAULT_STATE_SIZE
from fluxhop.workload.marks import COMPLETION_INDEX

__all__ = ["Unknown", "default_class_name", "policy_in_force"]

PROBE = "fluxhop-lead-state-probe-"  # generateName of the dry-run objects


@dataclass(frozen=True)
class Unknown:
    """A probe the API server refused; ``why`` is its words, one line."""

    why: str


def _dry_run(kube: Kube, obj: dict[str, Any]) -> dict[str, Any] | Unknown:
    try:
        return kube.create(obj, dry_run=True)
    except ClusterError as err:
        return Unknown(str(err).splitlines()[0] if str(err) else type(err).__name__)


def policy_in_force(kube: Kube) -> bool | Unknown:
    """Whether rank 0's pod gets its claim mounted (the policy is in force
    for this namespace). The probe asks for no resources: a LimitRange fills
    in its defaults, as it would for rank 0."""
    made = _dry_run(kube, {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": PROBE,
            "labels": {"app.kubernetes.io/managed-by": "fluxhop", COMPLETION_INDEX: "0"},
            "annotations": {LEAD_CLAIM_ANNOTATION: "probe", LEAD_CONTAINER_ANNOTATION: "probe"},
        },
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "probe", "image": "probe", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        },
    })  # fmt: skip
    if isinstance(made, Unknown):
        return made
    return LEAD_STATE_VOLUME in {v.get("name") for v in made["spec"].get("volumes") or []}


def default_class_name(kube: Kube) -> str | Unknown | None:
    """The default StorageClass's name; None when the cluster has none."""
    made = _dry_run(kube, {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"generateName": PROBE},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": DEFAULT_STATE_SIZE}}},
    })  # fmt: skip
    if isinstance(made, Unknown):
        return made
    name = made["spec"].get("storageClassName")
    return str(name) if name else None
