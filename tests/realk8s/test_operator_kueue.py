"""A queued MiniCluster resource is a Kueue workload in its own right (issue
#38 item 1), with the real Kueue (sigs.k8s.io/kueue) and ``fluxhop operator``
under deploy/'s ClusterRole, real Flux in the pods: the tests of --queue
(test_kueue.py), repeated with the resource.

The queue's one flavor, ``spare``, is the test cluster's real nodes: their
label. A broker lands there only if the operator gave its pods what Kueue's
admission names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fluxhop.spec.kueue import REQUIRED_TOPOLOGY
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.controllers import Running
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.placing import ON_REAL_NODES, flux_image, placed_minicluster
from tests.realk8s.queues import (
    QUEUE_LABEL,
    condition,
    local_queue,
    topology_queue,
    workload_priority,
    workloads_of,
)
from tests.realk8s.test_operator import Operator, deployed, until  # noqa: F401  (fixture)
from tests.realk8s.test_operator import operator as operator

pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]

QUOTA = {"cpu": "2"}  # two brokers of one CPU each


@pytest.fixture
def flavor(cluster: LocalCluster) -> tuple[dict[str, Any], set[str]]:
    """The flavor's node labels, and the nodes they name."""
    return {"nodeLabels": ON_REAL_NODES["nodeSelector"]}, set(cluster.real_nodes)


@pytest.fixture
def queue(kueue: Running, admin: Api, namespace: str,
          flavor: tuple[dict[str, Any], set[str]]) -> Iterator[str]:  # fmt: skip
    with local_queue(admin, namespace, "lq", QUOTA, flavor="spare", nodes=flavor[0],
                     preemption={"withinClusterQueue": "LowerPriority"}) as name:  # fmt: skip
        yield name


@pytest.fixture
def image(cluster: LocalCluster) -> str:
    """The brokers' image (Flux in it): where it runs is the flavor's to say."""
    return flux_image(cluster)[0]


def resource(name: str, queue: str, image: str, *, command: str | None = None,
             labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Two brokers of one CPU; interactive unless given a command."""
    container: dict[str, Any] = {"image": image, "resources": {"requests": {"cpu": "1"}}}
    spec: dict[str, Any] = {"size": 2, "flux": {"container": {"disable": True}},
                            "containers": [container]}  # fmt: skip
    if command is None:
        spec["interactive"] = True
    else:
        container["command"] = command
    return {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue, **(labels or {})}},
            "spec": spec}  # fmt: skip


def pods(admin: Api, namespace: str, name: str) -> list[dict[str, Any]]:
    return admin.get(f"/api/v1/namespaces/{namespace}/pods",
                     labelSelector=f"batch.kubernetes.io/job-name={name}")["items"]  # fmt: skip


def events(admin: Api, namespace: str, name: str) -> list[tuple[str, str, str]]:
    found = admin.get(f"/api/v1/namespaces/{namespace}/events",
                      fieldSelector=f"involvedObject.name={name}")["items"]  # fmt: skip
    return [(e["type"], e["reason"], e.get("message", "")) for e in found]


def test_a_queued_minicluster_waits_is_admitted_onto_its_flavor_and_finishes_its_workload(
    admin: Api,
    namespace: str,
    queue: str,
    operator: Operator,
    image: str,
    flavor: tuple[dict[str, Any], set[str]],
):
    path = MINICLUSTERS.format(namespace)
    admin.create(path, resource("first", queue, image))
    first = until("first Ready", operator, lambda: condition(
        admin.get(f"{path}/first"), "Ready").get("status") == "True" and admin.get(f"{path}/first"),
        300)  # fmt: skip
    assert not first["spec"].get("suspend"), first["spec"]  # unset: Kueue admitted it at once
    assert condition(first, "Admitted")["status"] == "True", first["status"]
    placed = {p["spec"]["nodeName"] for p in pods(admin, namespace, "first")}
    assert placed <= flavor[1] and placed, placed  # the flavor's nodes, tolerated
    (workload,) = workloads_of(admin, namespace, "first")
    assert [o["kind"] for o in workload["metadata"]["ownerReferences"]] == ["MiniCluster"]
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("brokers", 2)]
    job = admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/first")
    assert QUEUE_LABEL not in (job["metadata"].get("labels") or {})  # one Workload, not two
    # the second waits for the quota, held, with Kueue's reason
    admin.create(path, resource("second", queue, image, command='printf "[%s]" "a b" c'))

    def held() -> dict[str, Any] | None:
        cr = admin.get(f"{path}/second")
        said = condition(cr, "Admitted")
        return cr if "insufficient" in said.get("message", "") else None

    second = until("second held with Kueue's reason", operator, held, 120)
    assert second["spec"]["suspend"] is True
    assert condition(second, "Admitted")["status"] == "False"
    assert admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/second")["spec"]["suspend"]
    assert pods(admin, namespace, "second") == []
    # the first gone, the second is admitted, runs, and its Workload finishes
    admin.delete(f"{path}/first")
    done = until("second Succeeded", operator, lambda: condition(
        admin.get(f"{path}/second"), "Succeeded").get("status") == "True" and admin.get(
        f"{path}/second"), 300)  # fmt: skip
    assert done["status"]["exitCode"] == 0

    def finished() -> dict[str, Any] | None:
        found = workloads_of(admin, namespace, "second")
        return (
            found[0] if found and condition(found[0], "Finished").get("status") == "True" else None
        )

    workload = until("second's Workload Finished", operator, finished, 60)
    assert condition(workload, "Finished")["reason"] == "Succeeded"
    assert ("Normal", "Admitted") in [e[:2] for e in events(admin, namespace, "second")]


def test_a_higher_priority_preempts_it_and_it_comes_back(
    admin: Api, namespace: str, queue: str, operator: Operator, image: str
):
    workload_priority(admin, "fluxhop-test-low", 10)
    workload_priority(admin, "fluxhop-test-high", 1000)
    path = MINICLUSTERS.format(namespace)
    admin.create(path, resource("low", queue, image, labels={"kueue.x-k8s.io/priority-class":
                                                      "fluxhop-test-low"}))  # fmt: skip
    until("low Ready", operator, lambda: condition(admin.get(f"{path}/low"), "Ready").get(
        "status") == "True", 300)  # fmt: skip
    (workload,) = workloads_of(admin, namespace, "low")
    assert (workload["spec"]["priority"], workload["spec"]["priorityClassRef"]["name"]) == (
        10, "fluxhop-test-low")  # fmt: skip
    admin.create(path, resource("high", queue, image, command="true",
                                labels={"kueue.x-k8s.io/priority-class": "fluxhop-test-high"}))  # fmt: skip

    def preempted() -> dict[str, Any] | None:
        cr = admin.get(f"{path}/low")
        said = condition(cr, "Admitted")
        return cr if said.get("status") == "False" and said.get("reason") == "Preempted" else None

    low = until("low preempted, with the reason in its status", operator, preempted, 180)
    assert low["spec"]["suspend"] is True
    assert ("Warning", "Preempted") in [e[:2] for e in events(admin, namespace, "low")]
    until("high Succeeded", operator, lambda: condition(admin.get(f"{path}/high"), "Succeeded").get(
        "status") == "True", 300)  # fmt: skip
    # the high one done, its quota free: Kueue admits the low one again
    back = until("low Ready again", operator, lambda: condition(admin.get(f"{path}/low"), "Ready").get(
        "status") == "True" and admin.get(f"{path}/low"), 300)  # fmt: skip
    assert back["spec"]["suspend"] is False and condition(back, "Admitted")["status"] == "True"
    (workload,) = workloads_of(admin, namespace, "low")
    requeued = condition(workload, "Requeued")
    assert requeued.get("status") == "True", workload["status"]


def test_topology_aware_scheduling_places_its_brokers_in_one_zone(
    cluster: LocalCluster, kueue: Running, admin: Api, namespace: str, operator: Operator
):
    """The pods' podset-required-topology annotation becomes the Workload's
    topology request; admitted with a topology assignment, the operator gates
    the pods and names the Workload on them, and Kueue's TopologyUngater
    places each (its node selector) in the one zone it chose."""
    with topology_queue(admin, namespace, "near", {"cpu": "8"}):
        doc = resource("near", "near", "host", command="hostname")
        doc["spec"]["pod"] = {"annotations": {REQUIRED_TOPOLOGY: "topology.kubernetes.io/zone"}}
        doc = placed_minicluster(cluster, doc)  # the flavor names no nodes: the real ones
        admin.create(MINICLUSTERS.format(namespace), doc)
        path = f"{MINICLUSTERS.format(namespace)}/near"
        until("near Succeeded", operator, lambda: condition(
            admin.get(path), "Succeeded").get("status") == "True", 300, (admin, namespace))  # fmt: skip
        (workload,) = workloads_of(admin, namespace, "near")
        (pod_set,) = workload["spec"]["podSets"]
        assert pod_set["topologyRequest"]["required"] == "topology.kubernetes.io/zone"
        (assignment,) = workload["status"]["admission"]["podSetAssignments"]
        assert assignment.get("topologyAssignment"), assignment  # Kueue placed it
        placed = pods(admin, namespace, "near")
        assert len(placed) == 2
        zones = {admin.get(f"/api/v1/nodes/{p['spec']['nodeName']}")["metadata"]["labels"][
            "topology.kubernetes.io/zone"] for p in placed}  # fmt: skip
        assert len(zones) == 1, zones
        for pod in placed:  # ungated by Kueue, which gave each its domain
            assert not pod["spec"].get("schedulingGates"), pod["spec"]
            assert "kubernetes.io/hostname" in pod["spec"].get("nodeSelector", {}), pod["spec"]
            assert pod["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == (
                workload["metadata"]["name"])  # fmt: skip
