"""The Kubernetes kinds fluxhop reads and writes, as lightkube generic
resources: fluxhop's objects are plain dicts, and generic resources carry them
to the API without a typed model in between."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from fluxhop.errors import ClusterError

__all__ = ["KINDS", "Kind", "kind", "kind_of"]


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def title(self) -> str:
        """How kubectl names the resource: ``jobs.batch``, ``configmaps``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @functools.cached_property
    def resource(self) -> Any:
        make = create_namespaced_resource if self.namespaced else create_global_resource
        return make(self.group, self.version, self.kind, self.plural)


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("v1", "ConfigMap", "configmaps"),
        Kind("v1", "Secret", "secrets"),
        Kind("v1", "Service", "services"),
        Kind("v1", "Pod", "pods"),
        Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),  # spec.leadState's
        Kind("v1", "Event", "events"),
        Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
        Kind("batch/v1", "Job", "jobs"),
        Kind("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets"),
        Kind("flux-framework.org/v1alpha2", "MiniCluster", "miniclusters"),
        Kind("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs"),
        # Kueue's: a queued MiniCluster resource's Workload (operator/kueue.py), and
        # what its admission names
        Kind("kueue.x-k8s.io/v1beta2", "Workload", "workloads"),
        Kind("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", namespaced=False),
        # and the queue a MiniCluster names, read before it is made (cluster/queue_route.py)
        Kind("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues"),
        Kind("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", namespaced=False),
        Kind("kueue.x-k8s.io/v1beta2", "AdmissionCheck", "admissionchecks", namespaced=False),
        Kind(
            "kueue.x-k8s.io/v1beta2",
            "WorkloadPriorityClass",
            "workloadpriorityclasses",
            namespaced=False,
        ),
        # DWS's and NNF's, read for rabbit MiniClusters (fluxhop.rabbit)
        Kind("dataworkflowservices.github.io/v1alpha7", "Workflow", "workflows"),
        Kind("dataworkflowservices.github.io/v1alpha7", "ClientMount", "clientmounts"),
        Kind("nnf.cray.hpe.com/v1alpha11", "NnfAccess", "nnfaccesses"),
        Kind("nnf.cray.hpe.com/v1alpha11", "NnfContainerProfile", "nnfcontainerprofiles"),
        Kind("nnf.cray.hpe.com/v1alpha11", "NnfContainerData", "nnfcontainerdata"),
        Kind("lus.cray.hpe.com/v1beta1", "LustreFileSystem", "lustrefilesystems"),  # global Lustre
        Kind("kopf.dev/v1", "KopfPeering", "kopfpeerings"),  # the operator's peering
        Kind("kopf.dev/v1", "ClusterKopfPeering", "clusterkopfpeerings", namespaced=False),
        Kind("v1", "Node", "nodes", namespaced=False),  # tainted by spec.health's replace
        # read to choose where rank 0 keeps its state (cluster/lead_volume.py)
        Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False),
        Kind(
            "admissionregistration.k8s.io/v1",
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            namespaced=False,
        ),
    )
}


def kind(name: str) -> Kind:
    return KINDS[name]


def kind_of(obj: dict[str, Any]) -> Kind:
    found = KINDS.get(obj.get("kind", ""))
    if found is None or found.api_version != obj.get("apiVersion"):
        raise ClusterError(
            f"fluxhop does not manage {obj.get('apiVersion')} {obj.get('kind')} objects"
        )
    return found
