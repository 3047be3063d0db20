"""fluxhop operator as Kueue's job controller for a queued MiniCluster
resource (operator/kueue.py), on the fake API server with a stand-in Kueue
that writes its decisions on the Workload (tests/cluster/kueue.py). The real
Kueue admitting, queueing and preempting it: tests/realk8s/test_operator_kueue.py."""

from __future__ import annotations

import pytest

from fluxhop.operator.reconcile import Reconciler
from tests.cluster.fakeapi import DEFAULT_CRDS, KUEUE_KINDS, FakeAPIServer
from tests.cluster.kueue import Kueue
from tests.operator.test_reconcile import WRITES, conditions, current, events, resource

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
GPU_NODES = {"cloud.example.com/pool": "gpu"}
GPU_TAINT = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def fake():
    server = FakeAPIServer(crds=DEFAULT_CRDS | KUEUE_KINDS)
    server.flux_operator = False
    server.seed("ResourceFlavor", {"metadata": {"name": "gpus"},
                                   "spec": {"nodeLabels": GPU_NODES, "tolerations": [GPU_TAINT]}},
                namespace="")  # fmt: skip
    yield server
    server.close()


@pytest.fixture
def reconciler(ops) -> Reconciler:
    return Reconciler(ops)


@pytest.fixture
def queued(kube):
    """A queued resource of 2 brokers, reconciled once."""

    def make(name: str = "demo", labels: dict | None = None, **spec) -> Reconciler:
        doc = resource(name, size=2, maxSize=4, **spec)
        doc["metadata"]["labels"] = {**QUEUE, **(labels or {})}
        kube.apply(doc)
        return doc

    return make


def admission(cr: dict) -> dict:
    return next(c for c in cr["status"]["conditions"] if c["type"] == "Admitted")


def test_a_queued_resource_is_held_in_a_workload_of_its_own(fake, queued, reconciler):
    queued()
    out = reconciler.reconcile(current(fake))
    assert out.problem is None, out.problem
    workload = Kueue(fake).workload("demo")
    cr = current(fake)
    assert workload["metadata"]["name"].startswith("minicluster-demo-")
    assert workload["metadata"]["ownerReferences"] == [
        {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster", "name": "demo",
         "uid": cr["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == cr["metadata"]["uid"]
    assert workload["spec"]["queueName"] == "team-a"
    (pod_set,) = workload["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("brokers", 2)
    job = fake.get("Job", "demo")
    assert (
        pod_set["template"]["spec"]["containers"] == job["spec"]["template"]["spec"]["containers"]
    )
    # the resource is the Kueue workload: its Job is held, and no second one for Kueue
    assert job["spec"]["suspend"] is True
    assert not any(k.startswith("kueue.x-k8s.io/") for k in job["metadata"]["labels"])
    assert cr["spec"]["suspend"] is True
    assert admission(cr)["status"] == "False"
    Kueue(fake).hold("demo", "couldn't assign flavors to pod set brokers: insufficient quota")
    reconciler.reconcile(current(fake))
    said = admission(current(fake))
    assert (said["reason"], said["message"]) == (
        "Pending", "couldn't assign flavors to pod set brokers: insufficient quota")  # fmt: skip
    before = len(fake.requests)
    reconciler.reconcile(current(fake))
    assert [r for r in fake.requests[before:] if r.verb in WRITES] == []  # nothing new


def test_admitted_it_runs_on_the_flavors_nodes(fake, queued, reconciler):
    queued()
    reconciler.reconcile(current(fake))
    Kueue(fake).reserve("demo", flavor="gpus")
    out = reconciler.reconcile(current(fake))
    assert "start Job" in out.writes, out.writes
    job = fake.get("Job", "demo")
    assert job["spec"]["suspend"] is False
    pod = job["spec"]["template"]
    assert pod["spec"]["nodeSelector"].items() >= GPU_NODES.items()
    assert GPU_TAINT in pod["spec"]["tolerations"]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "brokers"
    assert current(fake)["spec"]["suspend"] is False
    assert admission(current(fake))["status"] == "True"
    assert ("Normal", "Admitted") in events(fake)


def test_an_admission_check_that_sets_a_label_twice_is_not_started(fake, queued, reconciler):
    """As Kueue ends a job it cannot start: the Workload Finished
    (FailedToStart), the Job held, the resource says why - and stays so."""
    queued()
    reconciler.reconcile(current(fake))
    clash = [{"name": "a", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
              "podSetUpdates": [
        {"name": "brokers", "nodeSelector": {"cloud.example.com/pool": "cpu"}}]}]  # fmt: skip
    Kueue(fake).reserve("demo", flavor="gpus", checks=clash)
    reconciler.reconcile(current(fake))
    finished = {c["type"]: c for c in Kueue(fake).workload("demo")["status"]["conditions"]}
    assert finished["Finished"]["reason"] == "FailedToStart"
    assert (
        "admission check a sets nodeSelector cloud.example.com/pool"
        in (finished["Finished"]["message"])
    )
    for _ in range(2):  # and again: nothing more written, never started
        out = reconciler.reconcile(current(fake))
        assert "finish Workload" not in out.writes and "start Job" not in out.writes, out.writes
    assert fake.get("Job", "demo")["spec"]["suspend"] is True
    said = admission(current(fake))
    assert (said["status"], said["reason"]) == ("False", "FailedToStart")


def test_evicted_it_stops_is_put_back_and_gives_back_the_quota(fake, queued, reconciler):
    queued()
    reconciler.reconcile(current(fake))
    Kueue(fake).reserve("demo", flavor="gpus")
    reconciler.reconcile(current(fake))
    fake.reconcile()  # the Job's pods
    Kueue(fake).evict("demo")
    out = reconciler.reconcile(current(fake))
    assert "suspend Job" in out.writes
    assert current(fake)["spec"]["suspend"] is True
    said = admission(current(fake))
    assert (said["status"], said["reason"]) == ("False", "Preempted")
    assert said["message"].startswith("Preempted to accommodate a workload")
    assert ("Warning", "Preempted") in events(fake)
    for _ in range(5):  # the Job controller deletes the suspended Job's pods
        fake.reconcile()
        out = reconciler.reconcile(current(fake))
        if "release Workload quota" in out.writes:
            break
    assert "release Workload quota" in out.writes, out.writes
    pod = fake.get("Job", "demo")["spec"]["template"]
    assert "nodeSelector" not in pod["spec"] and "tolerations" not in pod["spec"]
    assert "kueue.x-k8s.io/podset" not in pod["metadata"]["labels"]
    assert pod["metadata"]["labels"]["fluxhop.io/minicluster"] == "demo"  # its own stay
    workload = Kueue(fake).workload("demo")
    said = {c["type"]: c for c in workload["status"]["conditions"]}
    assert workload["status"].get("admission") is None
    assert (said["QuotaReserved"]["status"], said["Admitted"]["status"]) == ("False", "False")
    assert (said["Requeued"]["status"], said["Requeued"]["reason"]) == ("True", "Preempted")
    # Kueue admits it again: it runs again
    Kueue(fake).reserve("demo")
    assert "start Job" in reconciler.reconcile(current(fake)).writes
    assert fake.get("Job", "demo")["spec"]["suspend"] is False


def test_its_end_finishes_the_workload(fake, kube, reconciler):
    doc = resource(size=1, interactive=False, containers=[{"image": "ubuntu:noble",
                                                            "command": "true"}])  # fmt: skip
    doc["metadata"]["labels"] = dict(QUEUE)
    kube.apply(doc)
    reconciler.reconcile(current(fake))
    Kueue(fake).reserve("demo")
    for _ in range(50):
        fake.reconcile()
        out = reconciler.reconcile(current(fake))
        if "finish Workload" in out.writes:
            break
    assert "finish Workload" in out.writes, out.writes
    finished = {c["type"]: c for c in Kueue(fake).workload("demo")["status"]["conditions"]}
    assert (finished["Finished"]["status"], finished["Finished"]["reason"]) == ("True", "Succeeded")
    assert conditions(current(fake))["Succeeded"] == "True"


def test_priority_comes_from_kueues_class(fake, queued, reconciler):
    fake.seed("WorkloadPriorityClass", {"metadata": {"name": "urgent"}, "value": 900}, namespace="")
    queued(labels={"kueue.x-k8s.io/priority-class": "urgent"})
    assert reconciler.reconcile(current(fake)).problem is None
    spec = Kueue(fake).workload("demo")["spec"]
    assert (spec["priorityClassRef"], spec["priority"]) == (
        {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "urgent"}, 900)  # fmt: skip


def test_a_missing_priority_class_makes_nothing(fake, queued, reconciler):
    queued(labels={"kueue.x-k8s.io/priority-class": "nope"})
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None
    assert (
        out.problem.message
        == "WorkloadPriorityClass nope does not exist; create it, or name another"
    )
    assert [o["kind"] for o in fake.objects() if o["kind"] not in ("MiniCluster", "Event")] == []


def test_multikueues_workload_is_adopted_not_made(fake, queued, reconciler, kube):
    queued(labels={"kueue.x-k8s.io/prebuilt-workload-name": "from-manager"})
    reconciler.reconcile(current(fake))
    said = admission(current(fake))
    assert (said["reason"], said["message"]) == (
        "WorkloadMissing",
        "waiting for Workload from-manager",
    )
    assert fake.get("Job", "demo")["spec"]["suspend"] is True
    assert not [o for o in fake.objects(kinds=("Workload",))]
    copied = {"kueue.x-k8s.io/job-uid": "the-managers", "fluxhop.io/minicluster": "demo"}
    fake.seed("Workload", {"metadata": {"name": "from-manager", "labels": copied},
                           "spec": {"queueName": "team-a", "podSets": [{"name": "brokers",
                                    "count": 2, "template": {"spec": {"containers": []}}}]}})  # fmt: skip
    reconciler.reconcile(current(fake))
    workload = fake.get("Workload", "from-manager")
    uid = current(fake)["metadata"]["uid"]
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
    assert [o["uid"] for o in workload["metadata"]["ownerReferences"]] == [uid]
    assert len(fake.objects(kinds=("Workload",))) == 1


def test_a_pending_resource_changes_size_in_its_workload_an_admitted_one_not(
    fake, queued, reconciler, kube
):
    queued()
    reconciler.reconcile(current(fake))
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 3}})
    assert reconciler.reconcile(current(fake)).problem is None
    assert Kueue(fake).workload("demo")["spec"]["podSets"][0]["count"] == 3
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 3
    Kueue(fake).reserve("demo")
    reconciler.reconcile(current(fake))
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 4}})
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None and out.problem.reason == "ResizeRefused"
    assert "admitted by Kueue queue team-a" in out.problem.message
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 3


def test_a_workload_kueue_changed_since_it_was_read_is_not_written(fake, queued, reconciler):
    """A status patch carries the version read: a stale one is refused (409),
    nothing is reported as failed, and the next reconcile decides again."""
    queued()
    reconciler.reconcile(current(fake))
    Kueue(fake).reserve("demo")
    reconciler.reconcile(current(fake))
    fake.reconcile()
    Kueue(fake).evict("demo")
    reconciler.reconcile(current(fake))
    fake.reconcile()
    fake.reconcile()
    fake.fail("PATCH", "workloads/minicluster-demo-", 409)
    out = reconciler.reconcile(current(fake))
    assert out.problem is None and "release Workload quota" not in out.writes
    assert "release Workload quota" in reconciler.reconcile(current(fake)).writes


def test_an_unqueued_resource_is_held_by_spec_suspend(fake, kube, reconciler):
    kube.apply(resource(size=2, suspend=True))
    reconciler.reconcile(current(fake))
    assert fake.get("Job", "demo")["spec"]["suspend"] is True
    assert not fake.objects(kinds=("Workload",))
    kube.merge_patch("MiniCluster", "demo", {"spec": {"suspend": False}})
    out = reconciler.reconcile(current(fake))
    assert "patch Job suspend" in out.writes and out.problem is None  # no spec change refused
    assert fake.get("Job", "demo")["spec"]["suspend"] is False
    assert ("Normal", "Resumed") in events(fake)


def test_multikueues_workload_for_another_size_is_finished_out_of_sync(fake, queued, reconciler):
    queued(labels={"kueue.x-k8s.io/prebuilt-workload-name": "from-manager"})
    fake.seed("Workload", {"metadata": {"name": "from-manager", "labels": {}},
                           "spec": {"queueName": "team-a", "podSets": [{"name": "brokers",
                                    "count": 3, "template": {"spec": {"containers": []}}}]}})  # fmt: skip
    reconciler.reconcile(current(fake))
    said = admission(current(fake))
    assert (said["status"], said["reason"]) == ("False", "OutOfSync")
    finished = {c["type"]: c for c in fake.get("Workload", "from-manager")["status"]["conditions"]}
    assert finished["Finished"]["reason"] == "OutOfSync"
    assert fake.get("Job", "demo")["spec"]["suspend"] is True
