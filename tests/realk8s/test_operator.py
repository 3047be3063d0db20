"""``fluxhop operator`` on the real cluster: a process on this machine that
authenticates with a token of deploy/'s ServiceAccount, so deploy/'s
ClusterRole, enforced by the real API server, is all it may do. It
reconciles the upstream operator examples to Succeeded or Failed with the
exit code (real Flux in real containers on the real nodes), resizes through the scale subresource,
refuses a change it cannot make, and a delete leaves nothing (the garbage
collector follows the ownerReferences it writes)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.deployment import ROLE, USER, deploy
from tests.realk8s.operator_runs import Operator
from tests.realk8s.outcomes import MINICLUSTERS, upstream_example
from tests.realk8s.placing import REAL_NODES, placed_minicluster
from tests.realk8s.tools import eventually, kubectl

pytestmark = pytest.mark.usefixtures("needs_flux")


@pytest.fixture(scope="module")
def deployed(cluster: LocalCluster) -> Path:
    """deploy/ applied; a kubeconfig holding the operator's ServiceAccount token."""
    return deploy(cluster)


@pytest.fixture
def operator(
    cluster: LocalCluster, deployed: Path, namespace: str, tmp_path: Path
) -> Iterator[Operator]:
    running = Operator(cluster, deployed, namespace, tmp_path / "operator.log")
    yield running
    running.stop()


def example(cluster: LocalCluster, name: str, **spec: Any) -> dict[str, Any]:
    """An upstream operator example, its Flux from the image built with the
    project's Flux."""
    document = upstream_example(name)
    document["spec"].setdefault("flux", {})["container"] = {"disable": True}
    document["spec"].update(spec)
    for container in document["spec"]["containers"]:
        container["image"] = "host"
    return placed_minicluster(cluster, document)


def condition(resource: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (resource.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def _conditions(obj: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(c["type"], c["status"], c.get("reason"))
            for c in (obj.get("status") or {}).get("conditions") or []]  # fmt: skip


def scene(admin: Api, namespace: str) -> str:
    """What a namespace holds when a wait failed: each MiniCluster's
    conditions, each Kueue Workload's, each pod's phase, node, gates and
    waiting reasons, and the last Warning events."""
    lines = []
    for cr in admin.get(MINICLUSTERS.format(namespace))["items"]:
        lines.append(f"MiniCluster {cr['metadata']['name']}: {_conditions(cr)}")
    found = admin.find(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads")
    for workload in (found or {}).get("items") or []:
        lines.append(f"Workload {workload['metadata']['name']}: {_conditions(workload)}")
    for pod in admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]:
        waiting = [s["state"]["waiting"].get("reason") for s in pod["status"].get("containerStatuses") or []
                   if "waiting" in s.get("state", {})]  # fmt: skip
        lines.append(f"pod {pod['metadata']['name']}: {pod['status'].get('phase')} on "
                     f"{pod['spec'].get('nodeName')}, gates {pod['spec'].get('schedulingGates')}, "
                     f"nodeSelector {pod['spec'].get('nodeSelector')}, waiting {waiting}")  # fmt: skip
    warnings = [e for e in admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
                if e.get("type") == "Warning"][-10:]  # fmt: skip
    lines += [f"event {e['involvedObject'].get('name')}: {e.get('reason')}: {e.get('message')}"
              for e in warnings]  # fmt: skip
    return "\n".join(lines)


def until(what: str, operator: Operator, check: Any, timeout: float = 180,
          where: tuple[Api, str] | None = None) -> Any:  # fmt: skip
    """``eventually``; on a timeout, the operator's log and (``where``: an
    admin and a namespace) what the namespace holds."""
    try:
        return eventually(what, check, timeout)
    except AssertionError as error:
        try:
            seen = f"\nin the namespace:\n{scene(*where)}" if where else ""
        except Exception as err:  # the timeout is the failure: say it even so
            seen = f"\n(the namespace could not be read: {err})"
        raise AssertionError(f"{error}\noperator log:\n{operator.tail()}{seen}") from None


def test_an_example_runs_to_succeeded(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    document = example(cluster, "tests__hello-world__minicluster.yaml")
    path = MINICLUSTERS.format(namespace)
    admin.create(path, document)
    name = document["metadata"]["name"]
    done = until("Succeeded", operator, lambda: condition(admin.get(f"{path}/{name}"), "Succeeded").get(
        "status") == "True" and admin.get(f"{path}/{name}"))  # fmt: skip
    assert done["status"]["exitCode"] == 0
    # in real containers, from the image built with the project's Flux
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert {p["spec"]["nodeName"] for p in pods} <= {n.name for n in REAL_NODES}, pods
    peering = f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfpeerings/fluxhop-operator"
    assert admin.get(peering)["metadata"]["name"] == "fluxhop-operator"  # the operator made it
    # its log names the resource of each line (kopf's default does not)
    assert f"[{namespace}/{name}] Handler 'on_minicluster' succeeded" in operator.text()


def test_a_failing_command_reports_its_exit_code(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    document = example(cluster, "tests__hello-world__minicluster.yaml", size=2)
    document["spec"]["containers"][0]["command"] = "sh -c 'exit 3'"
    path = MINICLUSTERS.format(namespace)
    admin.create(path, document)
    name = document["metadata"]["name"]
    failed = until("Failed", operator, lambda: condition(admin.get(f"{path}/{name}"), "Failed").get(
        "status") == "True" and admin.get(f"{path}/{name}"))  # fmt: skip
    assert failed["status"]["exitCode"] == 3


def test_scale_refusal_and_delete(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    document = example(
        cluster, "tests__hello-world__minicluster.yaml", size=2, maxSize=3, interactive=True
    )
    document["spec"]["containers"][0].pop("command")
    path = MINICLUSTERS.format(namespace)
    admin.create(path, document)
    name = document["metadata"]["name"]
    resource = f"{path}/{name}"
    until(
        "Ready", operator, lambda: condition(admin.get(resource), "Ready").get("status") == "True"
    )
    until("2 brokers up", operator, lambda: admin.get(resource)["status"].get("brokersUp") == 2)
    kubectl(cluster, "scale", "-n", namespace, f"minicluster/{name}", "--replicas=3")
    job = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
    until("the Job resized", operator, lambda: admin.get(job)["spec"]["parallelism"] == 3)
    until("3 brokers up", operator, lambda: admin.get(resource)["status"].get("brokersUp") == 3)
    admin.patch(resource, {"spec": {"containers": [{"image": "elsewhere:1"}]}}, "merge")
    refused = until("the change refused", operator, lambda: condition(admin.get(resource), "SpecApplied").get(
        "status") == "False" and condition(admin.get(resource), "SpecApplied"))  # fmt: skip
    assert refused["reason"] == "SpecChangeRefused"
    admin.delete(resource)
    kinds = ("jobs", "pods", "configmaps", "secrets", "services")

    def gone() -> bool:
        for kind in kinds:
            group = "/apis/batch/v1" if kind == "jobs" else "/api/v1"
            items = admin.get(f"{group}/namespaces/{namespace}/{kind}")["items"]
            if [i for i in items if i["metadata"]["name"] != "kube-root-ca.crt"]:
                return False
        return True

    until("everything gone", operator, gone)


def test_without_a_verb_the_api_servers_403_is_what_the_operator_reports(
    cluster: LocalCluster, admin: Api, namespace: str, deployed: Path, tmp_path: Path
):
    role_path = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{ROLE}"
    original = admin.get(role_path)
    cut = copy.deepcopy(original)
    for rule in cut["rules"]:
        if rule.get("apiGroups") == ["batch"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    admin.replace(role_path, cut)
    operator = Operator(cluster, deployed, namespace, tmp_path / "operator.log")
    try:
        document = example(cluster, "tests__hello-world__minicluster.yaml")
        path = MINICLUSTERS.format(namespace)
        admin.create(path, document)
        resource = f"{path}/{document['metadata']['name']}"
        failed = until(
            "the refusal reported", operator, lambda: condition(admin.get(resource), "Failed")
        )
        expected = (
            f'jobs.batch is forbidden: User "{USER}" '
            f'cannot create resource "jobs" in API group "batch" in the namespace "{namespace}"'
        )
        assert expected in failed["message"], failed
    finally:
        operator.stop()
        current = admin.get(role_path)
        original["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        admin.replace(role_path, original)
