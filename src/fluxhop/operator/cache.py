"""What the operator's watches have shown: MiniCluster resources, and the
Jobs and pods fluxhop made for them, in kopf indexes; and what a reconcile
is given of them (``Seen``), what it last wrote (``Written``) and what it
did (``Outcome``).

This is the operator's informer cache (what a Go controller's client reads
from): kopf keeps each index from its watch, and calls no handler before
every index is filled from its first listing, so a reconcile given
``seen(...)`` needs no GET or LIST - an unchanged MiniCluster costs no
request at all, and a thousand of them no more at a restart. Each value is
the object as its last watch event had it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import kopf

from fluxhop.operator.status import Admission, Problem
from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.workload.marks import JOB_NAME

__all__ = [
    "GROUP",
    "PLURAL",
    "VERSION",
    "Outcome",
    "Seen",
    "Written",
    "fluxhop_jobs",
    "fluxhop_pods",
    "forget",
    "miniclusters",
    "remember",
    "resource",
    "seen",
]

GROUP, VERSION, PLURAL = "flux-framework.org", "v1alpha2", "miniclusters"
Key = tuple[str, str]  # (namespace, name)


@kopf.index(GROUP, VERSION, PLURAL)
def miniclusters(namespace: str, name: str, body: Any, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace, name): dict(body)}


@kopf.index("batch", "v1", "jobs", labels={MINICLUSTER_LABEL: kopf.PRESENT})
def fluxhop_jobs(namespace: str, name: str, body: Any, **_: Any) -> dict[Key, dict[str, Any]]:
    return {(namespace, name): dict(body)}


@kopf.index("", "v1", "pods", labels={MINICLUSTER_LABEL: kopf.PRESENT})
def fluxhop_pods(namespace: str, labels: Any, body: Any, **_: Any) -> dict[Key, dict[str, Any]]:
    """The pods by their Job's name (JOB_NAME: the Job controller's label)."""
    job = labels.get(JOB_NAME)
    return {(namespace, job): dict(body)} if job else {}


@dataclass(frozen=True)
class Written:
    """What this operator last wrote on a resource: the marks (annotations)
    and the status. A watch's copy of the resource can lag behind its own
    writes; compared with that copy, a reconcile would write them again (and
    post its events twice)."""

    annotations: dict[str, str] = field(default_factory=dict)
    status: dict[str, Any] | None = None
    version: str = ""  # the resource's resourceVersion after the last write

    def after(self, out: Outcome) -> Written:
        """What is written once ``out``'s reconcile has run."""
        return Written(
            {**self.annotations, **out.annotations},
            out.status if out.status is not None else self.status,
            out.version or self.version,
        )

    def behind(self, cr: dict[str, Any]) -> bool:
        """Whether ``cr`` is older than the last write (the watch lags): only
        then is this newer than it. A copy that has caught up is the truth,
        with whatever others wrote since (another replica before this one)."""
        try:
            return int(cr["metadata"].get("resourceVersion") or 0) < int(self.version)
        except ValueError:  # not an etcd revision: trust the copy
            return False


@dataclass(frozen=True)
class Seen:
    """A MiniCluster's Job (None: there is none) and pods as the operator's
    watches last showed them, and what it last wrote on the resource: a
    reconcile given these reads nothing."""

    job: dict[str, Any] | None
    pods: list[dict[str, Any]] = field(default_factory=list)
    written: Written = field(default_factory=Written)

    def pods_of(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The pods of ``job`` itself (not of an earlier Job of the same name)."""
        uid = job["metadata"].get("uid")
        return [
            pod
            for pod in self.pods
            if any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or [])
        ]


@dataclass
class Outcome:
    """What a reconcile did: its writes (for the benchmark and tests) and problem."""

    writes: list[str] = field(default_factory=list)
    problem: Problem | None = None
    status: dict[str, Any] | None = None  # the resource's status as it now is
    annotations: dict[str, str] = field(default_factory=dict)  # the marks it wrote
    version: str = ""  # the resource's resourceVersion after its last write
    admission: Admission | None = None  # Kueue's answer, for a queued resource


def _one(index: Any, key: Key) -> dict[str, Any] | None:
    found = list(index.get(key, ()))
    return found[0] if found else None


# What the operator last wrote on each resource, by (namespace, name): the
# resource's uid and the writes. Read and written under the handlers' lock of
# that MiniCluster; forgotten when the resource is gone.
_written: dict[Key, tuple[str, Written]] = {}


def seen(namespace: str, name: str, jobs: Any, pods: Any, uid: str = "") -> Seen | None:
    """MiniCluster ``name``'s Job and pods from the indexes kopf passes a
    handler (None when it passed none: a test calling the handler), and what
    was last written on it (if it is resource ``uid``, not an earlier one of
    the same name)."""
    if jobs is None or pods is None:
        return None
    job = _one(jobs, (namespace, name))
    last_uid, written = _written.get((namespace, name), ("", Written()))
    if not uid or last_uid != uid:
        written = Written()
    return Seen(job, list(pods.get((namespace, name), ())), written)


def remember(cr: Any, outcome: Outcome) -> None:
    """Keep what a reconcile of ``cr`` wrote, for the next one."""
    meta = cr["metadata"]
    key, uid = (meta["namespace"], meta["name"]), meta.get("uid", "")
    last_uid, last = _written.get(key, ("", Written()))
    _written[key] = (uid, (last if last_uid == uid else Written()).after(outcome))


def forget(namespace: str, name: str) -> None:
    _written.pop((namespace, name), None)


def resource(namespace: str, name: str, index: Any) -> dict[str, Any] | None:
    """The MiniCluster resource as its watch last showed it."""
    return _one(index, (namespace, name))
