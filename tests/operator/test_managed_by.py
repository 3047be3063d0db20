"""A MiniCluster resource whose spec.managedBy names another controller is
left alone by fluxhop operator: no Job, no status, no event, valid or not;
but for its Kueue Workload, where it has a queue;
tests/realk8s/test_operator_managed_by.py has the CRD refuse a change of it."""

from __future__ import annotations

import pytest

from fluxhop.errors import InputError
from fluxhop.operator.handlers import _queued_elsewhere, _selected
from fluxhop.operator.reconcile import Reconciler
from tests.cluster.fakeapi import KUEUE_KINDS
from tests.cluster.kueue import Kueue
from tests.operator.test_reconcile import current, events, resource


@pytest.fixture
def apply(kube):
    return kube.apply


@pytest.fixture
def reconciler(ops) -> Reconciler:
    return Reconciler(ops)


def test_another_controllers_resource_gets_no_write(fake, apply, reconciler: Reconciler):
    apply(resource(managedBy="kueue.x-k8s.io/multikueue"))
    before = len(fake.requests)
    out = reconciler.reconcile(current(fake))
    assert out.writes == [] and out.problem is None
    assert [r for r in fake.requests[before:] if r.method != "GET"] == []
    assert fake.get("Job", "demo") is None
    assert "status" not in current(fake) and events(fake) == []


def test_an_invalid_one_is_not_reported_either(fake, apply, reconciler: Reconciler):
    bad = resource(managedBy="kueue.x-k8s.io/multikueue")
    bad["spec"]["size"] = 0  # fluxhop would say Failed InvalidSpec: not its resource to say
    apply(bad)
    assert reconciler.reconcile(current(fake)).writes == []
    assert "status" not in current(fake)


def test_fluxhops_own_name_is_reconciled(fake, apply, reconciler: Reconciler):
    apply(resource(managedBy="fluxhop.io/operator"))
    reconciler.reconcile(current(fake))
    assert fake.get("Job", "demo") is not None


def test_the_handlers_never_select_it():
    ours = resource()
    theirs = resource(managedBy="kueue.x-k8s.io/multikueue")
    assert _selected({}, ours) and not _selected({}, theirs)


@pytest.mark.parametrize("fake", [KUEUE_KINDS], indirect=True)
def test_a_queued_one_gets_its_workload_and_nothing_else(fake, apply, reconciler: Reconciler):
    """On a MultiKueue manager: the Workload MultiKueue dispatches, owned by
    the resource; no Job, no status, no event, no mark on the resource."""
    doc = resource(managedBy="kueue.x-k8s.io/multikueue")
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    apply(doc)
    before = current(fake)
    out = reconciler.reconcile(before)
    assert out.writes == ["create Workload"] and out.problem is None
    (workload,) = fake.objects(kinds=("Workload",))
    assert workload["metadata"]["ownerReferences"][0]["uid"] == before["metadata"]["uid"]
    assert workload["spec"]["podSets"][0]["count"] == 2
    assert fake.get("Job", "demo") is None and events(fake) == []
    assert current(fake) == before  # not a byte written on it
    assert reconciler.reconcile(current(fake)).writes == []  # made once


def test_only_a_queued_one_is_selected_for_its_workload():
    theirs = resource(managedBy="kueue.x-k8s.io/multikueue")
    queued = resource(
        managedBy="kueue.x-k8s.io/multikueue", jobLabels={"kueue.x-k8s.io/queue-name": "q"}
    )
    assert not _queued_elsewhere({}, theirs) and _queued_elsewhere({}, queued)
    assert not _queued_elsewhere({}, resource(jobLabels={"kueue.x-k8s.io/queue-name": "q"}))
    assert not _selected({}, queued)  # never the create and update handlers: kopf would mark it


@pytest.mark.parametrize("fake", [KUEUE_KINDS], indirect=True)
def test_its_evicted_workload_gets_its_quota_back(fake, apply, reconciler: Reconciler):
    """A worker evicted its copy (or was lost): the manager's Workload is
    evicted too, and only a job controller gives its quota back."""
    doc = resource(managedBy="kueue.x-k8s.io/multikueue")
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    apply(doc)
    reconciler.reconcile(current(fake))
    Kueue(fake).reserve("demo")
    assert reconciler.reconcile(current(fake)).writes == []  # admitted: nothing to do
    Kueue(fake).evict("demo", reason="AdmissionCheck", message="the worker evicted it")
    assert reconciler.reconcile(current(fake)).writes == ["release Workload quota"]
    said = {c["type"]: c for c in Kueue(fake).workload("demo")["status"]["conditions"]}
    assert said["QuotaReserved"]["status"] == "False"
    assert reconciler.reconcile(current(fake)).writes == []


@pytest.mark.parametrize("fake", [KUEUE_KINDS], indirect=True)
def test_evicted_its_status_says_it_waits_again(fake, apply, kube, reconciler: Reconciler):
    """MultiKueue copies the worker's status back and never takes it back:
    once evicted, the manager's resource no longer says Ready or Running,
    nor the worker's output; it says it waits, in Kueue's words; once."""
    doc = resource(managedBy="kueue.x-k8s.io/multikueue")
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    apply(doc)
    reconciler.reconcile(current(fake))
    Kueue(fake).reserve("demo")
    copied = {"size": 2, "maximumSize": 2, "jobid": "demo", "selector": "fluxhop.io/minicluster=demo",
              "brokersUp": 2, "output": "step 10", "conditions": [
        {"type": "Ready", "status": "True", "reason": "BrokersUp", "message": "2/2 brokers up",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}  # fmt: skip
    kube.patch_status("MiniCluster", "demo", copied)
    assert reconciler.reconcile(current(fake)).writes == []  # admitted: MultiKueue's to say
    Kueue(fake).evict("demo", reason="Preempted", message="preempted on the worker")
    assert reconciler.reconcile(current(fake)).writes == [
        "release Workload quota",
        "status waiting again",
    ]
    status = current(fake)["status"]
    said = {c["type"]: c for c in status["conditions"]}
    assert said["Ready"]["status"] == "False" and said["Running"]["status"] == "False"
    assert (said["Admitted"]["status"], said["Admitted"]["reason"]) == ("False", "Preempted")
    assert said["Admitted"]["message"] == "preempted on the worker"
    assert "output" not in status and status["brokersUp"] == 0 and status["jobid"] == ""
    assert reconciler.reconcile(current(fake)).writes == []


def test_on_the_manager_fluxhop_lists_it_with_the_status_copied_back(fake, apply, kube, ops):
    """`fluxhop list/get` on a MultiKueue manager: the resource runs on a
    worker; its state and exit code are the status MultiKueue copies back."""
    doc = resource(managedBy="kueue.x-k8s.io/multikueue")
    apply(doc)
    (listed,) = ops.list()
    assert (listed.name, listed.state, listed.exit_code) == ("demo", "Pending", None)
    worker = {
        "size": 2,
        "maximumSize": 2,
        "jobid": "demo",
        "selector": "fluxhop.io/minicluster=demo",
    }
    kube.patch_status("MiniCluster", "demo", {**worker, "conditions": [
        {"type": "Ready", "status": "True", "reason": "BrokersUp", "message": "2/2 brokers up",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})  # fmt: skip
    assert ops.list()[0].state == "Running"
    kube.patch_status("MiniCluster", "demo", {**worker, "exitCode": 3, "conditions": [
        {"type": "Failed", "status": "True", "reason": "JobFailed",
         "message": "rank 0 exited with code 3", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})  # fmt: skip
    status = ops.status(ops.require("demo"))
    assert (status.state, status.exit_code) == ("Failed", 3)
    assert fake.get("Job", "demo") is None  # nothing of it runs here


def test_on_the_manager_what_needs_its_pods_says_where_they_are(fake, apply, ops):
    apply(resource(managedBy="kueue.x-k8s.io/multikueue"))
    with pytest.raises(InputError) as said:
        list(ops.logs(ops.require("demo")))
    assert str(said.value).startswith("MiniCluster demo runs on another cluster")
    assert "--context" in str(said.value) and "\n" not in str(said.value)
    with pytest.raises(InputError, match="runs on another cluster, whose copy a new size"):
        ops.scale(ops.require("demo"), 3)


@pytest.mark.parametrize("manager", ["not a domain/!!", "", "x" * 300, 5])
def test_a_managed_by_that_names_no_controller_is_fluxhops_to_refuse(manager):
    """Another controller's resource is left alone; a value that names no
    controller is no one's, so fluxhop ends it Failed (InvalidSpec)."""
    from fluxhop.operator.resource import managed_elsewhere

    assert managed_elsewhere({"spec": {"managedBy": manager}}) is False
    assert managed_elsewhere({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}) is True
