"""Where a MiniCluster's Kueue queue sends it, read before anything is made:
the queue must exist, and a queue whose ClusterQueue has MultiKueue's
admission check dispatches its workloads to worker clusters. Kueue's
webhook marks a batch Job for such a queue with ``spec.managedBy`` itself;
no webhook of Kueue's knows a MiniCluster resource, so fluxhop does the
same for it. A Job or JobSet of fluxhop's cannot go: MultiKueue copies the
Job to the worker but not the ConfigMap, Secret and Service it needs."""

from __future__ import annotations

import warnings
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopWarning, Forbidden, InputError, NotInstalled
from fluxhop.render.targets import Target
from fluxhop.spec.kueue import QUEUE_LABEL

__all__ = ["MULTIKUEUE", "admission_checks", "queue_route"]

MULTIKUEUE = "kueue.x-k8s.io/multikueue"  # MultiKueue's controller name, and managedBy


def admission_checks(cluster_queue: dict[str, Any]) -> list[str]:
    """The admission checks a ClusterQueue runs, in either of Kueue's spellings."""
    spec = cluster_queue.get("spec") or {}
    names = [str(name) for name in spec.get("admissionChecks") or []]
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return names + [str(rule["name"]) for rule in strategy if rule.get("name")]


def _dispatcher(kube: Kube, cluster_queue_name: str, where: str) -> str | None:
    """MULTIKUEUE when the ClusterQueue dispatches to other clusters. Who may
    not read ClusterQueues (Kueue's batch-user role may not) is told, once,
    what to write if it does."""
    try:
        cluster_queue = kube.get("ClusterQueue", cluster_queue_name)
        if cluster_queue is None:
            return None
        for name in admission_checks(cluster_queue):
            check = kube.get("AdmissionCheck", name) or {}
            if (check.get("spec") or {}).get("controllerName") == MULTIKUEUE:
                return MULTIKUEUE
    except NotInstalled:
        return None
    except Forbidden:
        warnings.warn(
            f"{where}: may not read ClusterQueue {cluster_queue_name} or its admission checks, "
            f"so whether it dispatches to other clusters is not known; if it does (MultiKueue), "
            f"set spec.managedBy: {MULTIKUEUE}",
            FluxhopWarning,
            stacklevel=3,
        )
    return None


def queue_route(kube: Kube, queue: str, target: Target) -> str | None:
    """The controller that dispatches queue ``queue``'s workloads to other
    clusters (MULTIKUEUE), or None when they run here; raises InputError, one
    line, for a queue that does not exist or a target that cannot go where
    it sends them. Nothing is checked where Kueue is not installed or the
    LocalQueue may not be read: Kueue then says what it says."""
    where = f"queue {queue!r} (label {QUEUE_LABEL})"
    try:
        local_queue = kube.get("LocalQueue", queue)
    except (Forbidden, NotInstalled):
        return None
    if local_queue is None:
        raise InputError(
            f"{where}: there is no LocalQueue {queue} in namespace {kube.namespace}; "
            f"kubectl get localqueues -n {kube.namespace} lists them"
        )
    cluster_queue = str((local_queue.get("spec") or {}).get("clusterQueue", ""))
    dispatcher = _dispatcher(kube, cluster_queue, where)
    if dispatcher and target is not Target.MINICLUSTER:
        raise InputError(
            f"{where} dispatches to other clusters (Kueue's MultiKueue), which copies a "
            f"{target.kind} there without the ConfigMap, Secret and Service beside it; use "
            "--target minicluster (fluxhop operator runs it on the worker)"
        )
    return dispatcher
