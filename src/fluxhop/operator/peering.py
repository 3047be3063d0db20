"""The peering object the operator's replicas share, made by the operator.

kopf's peering needs its KopfPeering (``-n``) or ClusterKopfPeering (``-A``)
object to exist, and never makes it. Shipping it in deploy/ beside its CRD
does not work: on a fresh cluster ``kubectl apply -k deploy/`` cannot map the
object's kind before the CRD it comes with is established, and fails. So the
operator makes the object at start, when it is missing (two replicas racing:
one create wins, the other's conflict is fine).
"""

from __future__ import annotations

from collections.abc import Sequence

from fluxhop.cluster.api import Kube
from fluxhop.errors import AlreadyExists

__all__ = ["ensure_peering"]

API_VERSION = "kopf.dev/v1"


def _ensure(kube: Kube, kind: str, name: str) -> bool:
    if kube.get(kind, name) is not None:
        return False
    try:
        kube.create({"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}})
    except AlreadyExists:
        return False
    return True


def ensure_peering(kube: Kube, name: str, namespaces: Sequence[str]) -> list[str]:
    """Make the peering object(s) that are missing: the cluster's one with no
    ``namespaces`` (``-A``), else one per namespace. Returns what it made."""
    if not namespaces:
        return [f"clusterkopfpeering/{name}"] if _ensure(kube, "ClusterKopfPeering", name) else []
    made = []
    for namespace in namespaces:
        scoped = kube.in_namespace(namespace)
        if _ensure(scoped, "KopfPeering", name):
            made.append(f"kopfpeering/{name} in {namespace}")
    return made
