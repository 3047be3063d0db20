"""A Kueue MultiKueue manager beside the test cluster, which is its worker:
a control plane of its own (no nodes: ``LocalCluster(name="manager")``), the
MiniCluster CRD and fluxhop's deploy/ on it, the real Kueue configured as
docs/guides/multicluster.md says (the MultiKueue gate, the generic adapter
for MiniCluster resources, deploy/multikueue-manager.yaml's RBAC), and the
worker known to it through deploy/multikueue-worker.yaml's ServiceAccount:
a kubeconfig Secret, a MultiKueueCluster, a MultiKueueConfig and an
AdmissionCheck; and a second worker whose API server never answers, which
MultiKueue marks inactive. Taken down with the module that uses it (before the test
cluster's teardown checks what is left on the machine)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.realk8s.api import Api
from tests.realk8s.cluster import REPO, LocalCluster, free_port
from tests.realk8s.controllers import CONTROLLERS, Running, _kueue
from tests.realk8s.deployment import deploy
from tests.realk8s.queues import KUEUE, local_queue
from tests.realk8s.tools import eventually, kubectl

__all__ = ["CHECK", "GONE", "WORKER", "Manager", "manager_of", "queues_on_both"]

WORKER = "worker-1"  # its MultiKueueCluster
GONE = "worker-gone"  # a MultiKueueCluster whose API server never answers
CHECK = "fluxhop-multikueue"  # the AdmissionCheck a manager's ClusterQueue names
ADAPTED = "MiniCluster.v1alpha2.flux-framework.org"


def _manager_config(port: int, health: int, certs: Path) -> dict[str, Any]:
    config = _kueue(port, health, certs)
    config["featureGates"] = {"VisibilityOnDemand": False, "MultiKueue": True,
                              "MultiKueueAdaptersForCustomJobs": True}  # fmt: skip
    config["multiKueue"] = {"externalFrameworks": [{"name": ADAPTED}]}
    # batch/job, Kueue's default and least (an empty list means it): MultiKueue
    # watches its Jobs on every worker too (deploy/multikueue-worker.yaml)
    config["integrations"] = {"frameworks": ["batch/job"]}
    return config


MANAGER_KUEUE = dataclasses.replace(CONTROLLERS["kueue"], config=_manager_config)


@dataclass
class Manager:
    cluster: LocalCluster
    operator_kubeconfig: Path  # deploy/'s ServiceAccount, on the manager

    def admin(self) -> Api:
        return self.cluster.admin()


def _apply(cluster: LocalCluster, path: Path) -> None:
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(path))


def _active(api: Api, path: str) -> bool:
    found = (api.get(path).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in found)


@contextmanager
def manager_of(worker: LocalCluster) -> Iterator[Manager]:
    """A manager whose one worker is ``worker`` (whose Kueue runs already)."""
    with ExitStack() as stack:
        local = LocalCluster(worker.bin, [], name="manager")
        stack.callback(local.stop)
        local.start()
        operator = deploy(local)
        kueue = Running(local, MANAGER_KUEUE)
        stack.callback(kueue.stop)
        kueue.start()
        _apply(local, REPO / "deploy" / "multikueue-manager.yaml")
        _apply(worker, REPO / "deploy" / "multikueue-worker.yaml")
        token = worker.token("kueue-system", "fluxhop-multikueue", seconds=24 * 3600)
        reachable = worker.kubeconfig_text("multikueue", token)
        # a worker whose API server does not answer (nothing listens there)
        gone = reachable.replace(worker.server, f"https://127.0.0.1:{free_port()}")
        with local.admin() as api:
            for name, kubeconfig in ((WORKER, reachable), (GONE, gone)):
                api.apply(f"/api/v1/namespaces/kueue-system/secrets/{name}", {
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": "kueue-system"},
                    "stringData": {"kubeconfig": kubeconfig},
                }, "test")  # fmt: skip
                api.apply(f"{KUEUE}/multikueueclusters/{name}", {
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
                    "metadata": {"name": name},
                    "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}},
                }, "test")  # fmt: skip
            api.apply(f"{KUEUE}/multikueueconfigs/fluxhop", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
                "metadata": {"name": "fluxhop"}, "spec": {"clusters": [GONE, WORKER]},
            }, "test")  # fmt: skip
            api.apply(f"{KUEUE}/admissionchecks/{CHECK}", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                "metadata": {"name": CHECK},
                "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                         "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                        "name": "fluxhop"}},
            }, "test")  # fmt: skip
            try:
                eventually("the worker connected", lambda: _active(
                    api, f"{KUEUE}/multikueueclusters/{WORKER}"), 120)  # fmt: skip
            except AssertionError as err:
                said = api.get(f"{KUEUE}/multikueueclusters/{WORKER}").get("status")
                log = local.workdir / "logs" / "kueue.log"
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise AssertionError(f"{err}: {said}\nthe manager's Kueue:\n{tail}") from None
            eventually("the admission check active", lambda: _active(
                api, f"{KUEUE}/admissionchecks/{CHECK}"), 120)  # fmt: skip
        yield Manager(local, operator)


@contextmanager
def queues_on_both(manager: Manager, worker: Api, namespace: str, name: str,
                   quota: dict[str, str], **spec: Any) -> Iterator[str]:  # fmt: skip
    """LocalQueue ``name`` in ``namespace`` on both: the manager's with the
    MultiKueue admission check (and quota enough to let it through), the
    worker's with ``quota`` (``spec``: more of its ClusterQueue's spec); the
    namespace made on the manager too."""
    with manager.admin() as api, ExitStack() as stack:
        api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        stack.callback(api.delete, f"/api/v1/namespaces/{namespace}")
        stack.enter_context(local_queue(worker, namespace, name, quota, **spec))
        stack.enter_context(local_queue(
            api, namespace, name, {resource: "100" for resource in quota},
            admissionChecksStrategy={"admissionChecks": [{"name": CHECK}]}))  # fmt: skip
        yield name
