"""The Workload of a queued MiniCluster resource (render/kueue_workload.py):
one pod set of the brokers, owned by the resource, named as Kueue names its
own; admissible by Kueue's CRD (from its Go module, where fetched); and the
spec.suspend extension that holds a MiniCluster."""

from __future__ import annotations

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.render import render
from fluxhop.render.kueue_workload import Priority, kueue_workload, workload_name
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.schemas import kueue_crds, validate

UID = "0b6c9b8e-3f7a-4d0e-9a55-3a3e3cbd1f00"


def queued(**labels: str) -> tuple[MiniCluster, dict]:
    doc = minicluster_doc("demo", "team", size=3,
                          containers=[{"image": "ubuntu:noble", "resources": {"requests": {"cpu": "1"}}}])  # fmt: skip
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq", **labels}
    owner = {**doc, "metadata": {**doc["metadata"], "uid": UID}}
    return MiniCluster.from_dict(doc), owner


def workload(**kw) -> dict:
    spec, owner = queued()
    template = render(spec)[-1]["spec"]["template"]
    return kueue_workload(spec, template, owner, **kw)


def test_one_pod_set_of_the_brokers_owned_by_the_resource():
    made = workload()
    (pod_set,) = made["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("brokers", 3)
    assert set(pod_set["template"]["metadata"]) <= {"labels", "annotations"}
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert made["spec"]["queueName"] == "lq" and "priorityClassRef" not in made["spec"]
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("MiniCluster", UID, True)
    labels = made["metadata"]["labels"]
    assert labels == {"kueue.x-k8s.io/job-uid": UID, "fluxhop.io/minicluster": "demo"}
    assert made["metadata"]["namespace"] == "team"


def test_the_name_is_kueues_shape_and_tells_one_resource_from_another():
    first = workload_name("demo", UID)
    assert first.startswith("minicluster-demo-") and len(first) == len("minicluster-demo-") + 5
    assert workload_name("demo", UID) == first  # same input, same bytes
    assert workload_name("demo", "another-uid") != first
    assert len(workload_name("x" * 300, UID)) <= 253


def test_a_workload_priority_class_gives_both_fields():
    made = workload(priority=Priority("urgent", 900))
    assert made["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "urgent"}  # fmt: skip
    assert made["spec"]["priority"] == 900


def test_the_topology_request_is_the_one_kueue_makes_for_a_job():
    (pod_set,) = workload()["spec"]["podSets"]
    assert pod_set["topologyRequest"] == {
        "podIndexLabel": "batch.kubernetes.io/job-completion-index"
    }
    spec, owner = queued()
    spec.spec.pod.annotations["kueue.x-k8s.io/podset-required-topology"] = "zone"
    made = kueue_workload(spec, render(spec)[-1]["spec"]["template"], owner)
    assert made["spec"]["podSets"][0]["topologyRequest"] == {
        "podIndexLabel": "batch.kubernetes.io/job-completion-index", "required": "zone"}  # fmt: skip


@pytest.mark.skipif(kueue_crds() is None, reason="Kueue's Go module is not fetched here")
def test_kueues_crd_admits_it():
    validate(workload(priority=Priority("urgent", 900)))


def test_a_resource_without_a_queue_has_no_workload():
    spec = MiniCluster.from_dict(minicluster_doc("demo", containers=[{"image": "ubuntu:noble"}]))
    with pytest.raises(ValueError, match="names no queue"):
        kueue_workload(spec, {"spec": {}}, {"apiVersion": "v", "kind": "MiniCluster",
                                            "metadata": {"name": "demo", "uid": UID}})  # fmt: skip


def test_spec_suspend_holds_the_job_and_the_flux_operators_resource_drops_it():
    doc = minicluster_doc("demo", containers=[{"image": "ubuntu:noble"}], suspend=True)
    spec = MiniCluster.from_dict(doc)
    assert render(spec)[-1]["spec"]["suspend"] is True
    assert "suspend" not in render(MiniCluster.from_dict(minicluster_doc(
        "demo", containers=[{"image": "ubuntu:noble"}])))[-1]["spec"]  # fmt: skip
    with pytest.warns(FluxhopWarning, match="spec.suspend is not copied"):
        (resource,) = render(spec, "minicluster")
    assert "suspend" not in resource["spec"]
