"""The peering object the operator's replicas share, made by the operator.

kopf's peering needs its KopfPeering (``-n``) or ClusterKopfPeering (``-A``)
object to exist, and never makes it. Shipping it in deploy/ beside its CRD
does not work: on a fresh cluster ``kubectl apply -k deploy/`` cannot map the
object's kind before the CRD it comes with is established, and fails. So the
operator makes the object at start, when it is missing (two replicas racing:
one create wins, the other's conflict is fine).

Each replica is named in the peering by kopf: ``POD_ID`` (deploy/ sets it to
the pod's name), else its user and host.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import MutableMapping, Sequence

from fluxhop.cluster.api import Kube
from fluxhop.errors import AlreadyExists

__all__ = ["ensure_peering", "nameable"]

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


def nameable(env: MutableMapping[str, str]) -> None:
    """Make sure kopf can name this replica. Without ``POD_ID`` it asks
    getpass for the user, which reads LOGNAME, USER, ... and then the passwd
    entry; a pod's uid often has none (deploy/ runs as 65532, which the image
    does not name), and kopf then stopped at start with "getpwuid(): uid not
    found". Such a user is named by its uid."""
    if env.get("POD_ID"):
        return
    try:
        getpass.getuser()
    except (KeyError, OSError):  # KeyError to Python 3.12, OSError from 3.13
        env["LOGNAME"] = str(os.getuid())
