"""A Kueue MultiKueue manager beside the test cluster, which is its worker:
a control plane of its own (no nodes: ``LocalCluster(name="manager")``), the
MiniCluster CRD and fluxhop's deploy/ on it, the real Kueue configured as
docs/guides/multicluster.md says (the MultiKueue gate, the generic adapter
for MiniCluster resources, deploy/multikueue-manager.yaml's RBAC), and the
worker known to it through deploy/multikueue-worker.yaml's ServiceAccount:
a kubeconfig Secret, a MultiKueueCluster, a MultiKueueConfig and an
AdmissionCheck; and a worker whose API server never answers, which
MultiKueue marks inactive. Taken down with the module that uses it (before the test
cluster's teardown checks what is left on the machine). For one test, a second
worker with nodes of its own (``second_worker_of``: a guest LocalCluster on the
test cluster's pod network, with its own Kueue and deploy/)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.realk8s.api import Api
from tests.realk8s.cluster import REPO, LocalCluster, NodeSpec, free_port
from tests.realk8s.controllers import CONTROLLERS, Controller, Running, _kueue
from tests.realk8s.deployment import deploy
from tests.realk8s.placing import REAL
from tests.realk8s.queues import KUEUE, local_queue
from tests.realk8s.tools import eventually, kubectl

__all__ = [
    "CHECK",
    "GONE",
    "WORKER",
    "WORKER2",
    "Manager",
    "SecondWorker",
    "manager_of",
    "queues_on_both",
    "second_worker_of",
]

WORKER = "worker-1"  # its MultiKueueCluster
WORKER2 = "worker-2"  # a second worker with nodes (second_worker_of), for one test
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
    worker: LocalCluster  # its first worker, the test cluster

    def admin(self) -> Api:
        return self.cluster.admin()


def _apply(cluster: LocalCluster, path: Path) -> None:
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(path))


def _active(api: Api, path: str) -> bool:
    found = (api.get(path).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in found)


def _kubeconfig(worker: LocalCluster) -> str:
    """How the manager's Kueue reaches ``worker``: deploy/multikueue-worker.yaml's
    ServiceAccount, its token and the CA inline (Kueue refuses file paths)."""
    _apply(worker, REPO / "deploy" / "multikueue-worker.yaml")
    token = worker.token("kueue-system", "fluxhop-multikueue", seconds=24 * 3600)
    return worker.kubeconfig_text("multikueue", token)


def _register(api: Api, name: str, kubeconfig: str) -> None:
    """Worker ``name`` known to the manager: its kubeconfig Secret and MultiKueueCluster."""
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


def _workers(api: Api, names: list[str]) -> None:
    """The workers MultiKueue dispatches to (its MultiKueueConfig)."""
    api.apply(f"{KUEUE}/multikueueconfigs/fluxhop", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
        "metadata": {"name": "fluxhop"}, "spec": {"clusters": names},
    }, "test")  # fmt: skip


def _connected(api: Api, local: LocalCluster, name: str) -> None:
    try:
        eventually(f"{name} connected", lambda: _active(
            api, f"{KUEUE}/multikueueclusters/{name}"), 120)  # fmt: skip
    except AssertionError as err:
        said = api.get(f"{KUEUE}/multikueueclusters/{name}").get("status")
        log = local.workdir / "logs" / "kueue.log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        raise AssertionError(f"{err}: {said}\nthe manager's Kueue:\n{tail}") from None


def _started(stack: ExitStack, local: LocalCluster, kueue: Controller) -> Path:
    """``local`` started with deploy/ and ``kueue`` (both stopped with
    ``stack``); the kubeconfig of deploy/'s ServiceAccount there."""
    stack.callback(local.stop)
    local.start()
    operator = deploy(local)
    running = Running(local, kueue)
    stack.callback(running.stop)
    running.start()
    return operator


@contextmanager
def manager_of(worker: LocalCluster) -> Iterator[Manager]:
    """A manager whose one worker is ``worker`` (whose Kueue runs already)."""
    with ExitStack() as stack:
        local = LocalCluster(worker.bin, [], name="manager")
        operator = _started(stack, local, MANAGER_KUEUE)
        _apply(local, REPO / "deploy" / "multikueue-manager.yaml")
        reachable = _kubeconfig(worker)
        # a worker whose API server does not answer (nothing listens there)
        gone = reachable.replace(worker.server, f"https://127.0.0.1:{free_port()}")
        with local.admin() as api:
            for name, kubeconfig in ((WORKER, reachable), (GONE, gone)):
                _register(api, name, kubeconfig)
            _workers(api, [GONE, WORKER])
            api.apply(f"{KUEUE}/admissionchecks/{CHECK}", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                "metadata": {"name": CHECK},
                "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                         "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                        "name": "fluxhop"}},
            }, "test")  # fmt: skip
            _connected(api, local, WORKER)
            eventually("the admission check active", lambda: _active(
                api, f"{KUEUE}/admissionchecks/{CHECK}"), 120)  # fmt: skip
        yield Manager(local, operator, worker)


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


def _worker_config(port: int, health: int, certs: Path) -> dict[str, Any]:
    config = _kueue(port, health, certs)
    config["integrations"] = {"frameworks": ["batch/job"]}  # no JobSet there
    return config


WORKER_KUEUE = dataclasses.replace(CONTROLLERS["kueue"], config=_worker_config)


@dataclass
class SecondWorker:
    cluster: LocalCluster
    operator_kubeconfig: Path  # deploy/'s ServiceAccount, on it


@contextmanager
def second_worker_of(manager: Manager, first: LocalCluster) -> Iterator[SecondWorker]:
    """Worker ``WORKER2``, with nodes of its own on the test cluster's pod
    network (a guest LocalCluster of two real nodes, labelled as the test
    cluster's), its own Kueue and deploy/,
    added to the manager's workers for the life of the context."""
    nodes = [NodeSpec(f"w2-node-r{x}", labels={"topology.kubernetes.io/zone": "zone-w2", REAL: "yes"})
             for x in "01"]  # fmt: skip
    with ExitStack() as stack:
        local = LocalCluster(first.bin, nodes, first.flux_prefix, name=WORKER2)
        operator = _started(stack, local, WORKER_KUEUE)
        kubeconfig = _kubeconfig(local)
        with manager.admin() as api:
            _register(api, WORKER2, kubeconfig)
            stack.callback(_forget, manager, WORKER2)
            _workers(api, [GONE, WORKER, WORKER2])
            _connected(api, manager.cluster, WORKER2)
        yield SecondWorker(local, operator)


def _forget(manager: Manager, name: str) -> None:
    with manager.admin() as api:
        _workers(api, [GONE, WORKER])
        api.delete(f"{KUEUE}/multikueueclusters/{name}")
        api.delete(f"/api/v1/namespaces/kueue-system/secrets/{name}")
