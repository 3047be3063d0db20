"""A Kueue LocalQueue for a test: a ResourceFlavor ``default``, a ClusterQueue
of the quota asked for that admits from one namespace only, and the
LocalQueue on it; taken down after the test, its Workloads first (their
finalizers need Kueue up, and the namespace waits for them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.realk8s.api import Api, ApiError
from tests.realk8s.tools import eventually

__all__ = ["KUEUE", "QUEUE_LABEL", "condition", "local_queue", "workload_priority", "workloads_of"]

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
FLAVOR = "default"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _active(admin: Api, cq: str) -> bool:
    conditions = admin.get(f"{KUEUE}/clusterqueues/{cq}").get("status", {}).get("conditions")
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions or [])


@contextmanager
def local_queue(admin: Api, namespace: str, name: str, quota: dict[str, str], *,
                flavor: str = FLAVOR, nodes: dict[str, Any] | None = None,
                **spec: Any) -> Iterator[str]:  # fmt: skip
    """LocalQueue ``name`` in ``namespace`` with ``quota`` (resource -> nominal
    quota, each a covered resource of ResourceFlavor ``flavor``, whose spec
    is ``nodes``: nodeLabels, tolerations); ``spec`` adds to the
    ClusterQueue's spec (preemption, ...)."""
    cq = f"{name}-{namespace}"
    admin.apply(f"{KUEUE}/resourceflavors/{flavor}", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor},
        **({"spec": nodes} if nodes else {}),
    }, "test")  # fmt: skip
    resources = [{"name": resource, "nominalQuota": value} for resource, value in quota.items()]
    admin.apply(f"{KUEUE}/clusterqueues/{cq}", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{"coveredResources": list(quota),
                                "flavors": [{"name": flavor, "resources": resources}]}],
            **spec,
        },
    }, "test")  # fmt: skip
    admin.apply(f"{KUEUE}/namespaces/{namespace}/localqueues/{name}", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq},
    }, "test")  # fmt: skip
    eventually("the ClusterQueue active", lambda: _active(admin, cq))
    try:
        yield name
    finally:
        # the queued Jobs at once (one request: a Job its owner's deletion
        # takes first is no 404); the namespace's others stay
        for queued in ("/apis/batch/v1/namespaces/{}/jobs",
                       "/apis/flux-framework.org/v1alpha2/namespaces/{}/miniclusters"):  # fmt: skip
            try:
                admin.delete(queued.format(namespace), {"propagationPolicy": "Background"},
                             labelSelector=QUEUE_LABEL)  # fmt: skip
            except ApiError as err:
                if err.status != 404:  # 404: no MiniCluster CRD installed, so none queued
                    raise
        eventually("its Workloads gone", lambda: not workloads_of(admin, namespace))
        admin.delete(f"{KUEUE}/namespaces/{namespace}/localqueues/{name}")
        admin.delete(f"{KUEUE}/clusterqueues/{cq}")
        # gone, not going: a queue of the same name made next must be a new one
        # (Kueue forgets a ClusterQueue whose deletion ends after it was applied)
        eventually(
            "the ClusterQueue gone", lambda: admin.find(f"{KUEUE}/clusterqueues/{cq}") is None
        )


@contextmanager
def topology_queue(admin: Api, namespace: str, name: str, quota: dict[str, str]) -> Iterator[str]:
    """LocalQueue ``name`` whose one flavor, ``tas``, names Topology ``zones``
    over the kubelets' node labels (zone, then host name): Kueue's
    topology-aware scheduling."""
    admin.apply(f"{KUEUE}/topologies/zones", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "zones"},
        "spec": {"levels": [{"nodeLabel": "topology.kubernetes.io/zone"},
                            {"nodeLabel": "kubernetes.io/hostname"}]},
    }, "test")  # fmt: skip
    try:
        with local_queue(admin, namespace, name, quota, flavor="tas", nodes={
                "nodeLabels": {"kubernetes.io/os": "linux"}, "topologyName": "zones"}):  # fmt: skip
            yield name
    finally:
        admin.delete(f"{KUEUE}/resourceflavors/tas")
        admin.delete(f"{KUEUE}/topologies/zones")


def workloads_of(admin: Api, namespace: str, job: str | None = None) -> list[dict[str, Any]]:
    """Kueue's Workloads in ``namespace`` (those of Job or MiniCluster
    resource ``job`` only, if named)."""
    found = admin.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
    return [w for w in found if job is None or any(
        owner["kind"] in ("Job", "MiniCluster") and owner["name"] == job
        for owner in w["metadata"].get("ownerReferences") or [])]  # fmt: skip


def workload_priority(api: Api, name: str, value: int) -> None:
    """A WorkloadPriorityClass, Kueue's own priority for a workload."""
    api.apply(f"{KUEUE}/workloadpriorityclasses/{name}", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
        "metadata": {"name": name}, "value": value,
    }, "test")  # fmt: skip


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """``obj``'s status condition of type ``kind`` ({} if it has none)."""
    found = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in found if c["type"] == kind), {})
