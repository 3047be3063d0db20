"""The kopf handlers, called as plain functions against the fake API server."""

from __future__ import annotations

import kopf

from fluxhop.operator import handlers, memory
from fluxhop.operator.resource import FIELD_MANAGER
from tests.operator.test_reconcile import conditions, resource


def test_a_new_resource_is_reconciled_with_the_operators_field_manager(fake, connected, kube):
    kube.apply(resource())
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    assert fake.get("Job", "demo") is not None
    applies = [r for r in fake.requests if r.verb == "APPLY"]
    assert applies and all(r.params.get("fieldManager") == FIELD_MANAGER for r in applies[1:])


def test_pod_events_bring_the_status_up_to_date(fake, connected, kube):
    kube.apply(resource())
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    for _ in range(50):
        fake.reconcile()
        pods = [o for o in fake.objects(kinds=("Pod",))]
        if len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods):
            break
    for pod in pods:
        handlers.on_pod(body=pod, namespace="default", type="MODIFIED")
    cr = fake.get("MiniCluster", "demo")
    assert conditions(cr)["Ready"] == "True" and cr["status"]["brokersUp"] == 2


def test_pods_of_other_minicluster_kinds_are_left_alone(fake, connected, kube):
    from fluxhop.cluster.operations import MiniClusters
    from fluxhop.spec.flags import minicluster_from_flags

    MiniClusters(kube).create(minicluster_from_flags([], image="ubuntu", nodes=1, name="plain"))
    fake.reconcile()
    (pod,) = fake.objects(kinds=("Pod",))
    before = len(fake.requests)
    handlers.on_pod(body=pod, namespace="default", type="MODIFIED")
    assert [r.verb for r in fake.requests[before:]] == ["GET"]  # looked, wrote nothing


def test_the_selector_picks_the_resources(monkeypatch):
    monkeypatch.setattr(handlers, "selector", {"team": "a"})
    assert handlers._selected({"team": "a", "x": "y"})
    assert not handlers._selected({"team": "b"})
    assert not handlers._selected({})


def test_settings_peer_and_keep_kopfs_state_under_fluxhops_prefix():
    settings = kopf.OperatorSettings()
    handlers.configure(settings=settings)
    assert settings.peering.name == handlers.PEERING and settings.peering.mandatory
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)


def test_the_api_refusing_is_a_retry_not_a_crash(fake, connected, kube):
    kube.apply(resource())
    fake.fail("POST", "/jobs", 403, times=10)
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    cr = fake.get("MiniCluster", "demo")
    failed = next(c for c in cr["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ApplyFailed" and "forbidden" in failed["message"]


# --- autoscaling ------------------------------------------------------------------


def lead(name: str, *, phase: str = "Running", created: str = "2026-12-01T00:00:00Z",
         uid: str = "u1") -> dict:  # fmt: skip
    return {
        "metadata": {"name": name, "uid": uid, "creationTimestamp": created,
                     "labels": {"batch.kubernetes.io/job-completion-index": "0"}},
        "status": {"phase": phase, "podIP": "10.0.0.1"},
    }  # fmt: skip


def test_the_pod_watch_remembers_rank_0_for_the_timer(monkeypatch):
    monkeypatch.setattr(memory, "leads", {})
    old, new = lead("demo-0-a"), lead("demo-0-b", created="2026-12-01T00:01:00Z", uid="u2")
    handlers._remember_lead(new, "default", "demo", "ADDED")
    handlers._remember_lead(old, "default", "demo", "MODIFIED")  # late news of the old one
    assert memory.leads[("default", "demo")] is new
    handlers._remember_lead(old, "default", "demo", "DELETED")  # not the one remembered
    assert memory.leads[("default", "demo")] is new
    worker = lead("demo-1-a")
    worker["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = "1"
    handlers._remember_lead(worker, "default", "demo", "ADDED")
    assert memory.leads[("default", "demo")] is new
    monkeypatch.setattr(memory, "versions", {("default", "demo"): "v1", ("default", "x"): "v"})
    monkeypatch.setattr(memory, "unwaited", {("default", "demo"): 1.0})
    handlers._remember_lead(new, "default", "demo", "DELETED")
    assert ("default", "demo") not in memory.leads
    assert memory.versions == {("default", "x"): "v"} and memory.unwaited == {}
