"""The kopf handlers, called as plain functions against the fake API server."""

from __future__ import annotations

import kopf
import pytest

from fluxhop.cluster.api import Kube
from fluxhop.operator import handlers
from fluxhop.operator.autoscale_timer import Tick
from fluxhop.operator.resource import FIELD_MANAGER
from tests.operator.test_reconcile import conditions, resource


@pytest.fixture
def connected(fake, kubeconfig, monkeypatch):
    made = []

    def connect(namespace: str) -> Kube:
        kube = Kube.connect(
            str(kubeconfig),
            namespace=namespace,
            transport=fake.transport(),
            field_manager=FIELD_MANAGER,
        )
        made.append(kube)
        return kube

    monkeypatch.setattr(handlers, "connect", connect)
    monkeypatch.setattr(handlers, "selector", {})
    return made


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
    monkeypatch.setattr(handlers, "leads", {})
    old, new = lead("demo-0-a"), lead("demo-0-b", created="2026-12-01T00:01:00Z", uid="u2")
    handlers._remember_lead(new, "default", "demo", "ADDED")
    handlers._remember_lead(old, "default", "demo", "MODIFIED")  # late news of the old one
    assert handlers.leads[("default", "demo")] is new
    handlers._remember_lead(old, "default", "demo", "DELETED")  # not the one remembered
    assert handlers.leads[("default", "demo")] is new
    worker = lead("demo-1-a")
    worker["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = "1"
    handlers._remember_lead(worker, "default", "demo", "ADDED")
    assert handlers.leads[("default", "demo")] is new
    monkeypatch.setattr(handlers, "versions", {("default", "demo"): "v1", ("default", "x"): "v"})
    monkeypatch.setattr(handlers, "unwaited", {("default", "demo"): 1.0})
    handlers._remember_lead(new, "default", "demo", "DELETED")
    assert ("default", "demo") not in handlers.leads
    assert handlers.versions == {("default", "x"): "v"} and handlers.unwaited == {}


def test_the_timer_looks_only_at_operated_resources_that_autoscale(monkeypatch):
    monkeypatch.setattr(handlers, "selector", {})
    body = resource(maxSize=4, autoscale={})
    assert not handlers._autoscaled(body)  # not reconciled by fluxhop's operator yet
    body["metadata"]["annotations"] = {"fluxhop.io/operated-by": FIELD_MANAGER}
    assert handlers._autoscaled(body)
    del body["spec"]["autoscale"]
    assert not handlers._autoscaled(body)


def test_the_timer_is_registered_with_its_interval():
    registry = kopf.OperatorRegistry()
    handlers.register_autoscaling(0.5, registry=registry)
    (timer,) = [h for h in registry._spawning.get_all_handlers() if h.id == "autoscale"]
    assert timer.interval == 0.5 and timer.fn is handlers.on_autoscale


def test_a_look_sends_no_request_once_the_watch_saw_rank_0(fake, connected, kube,
                                                                    monkeypatch):  # fmt: skip
    fake.runner = lambda pod, index: None
    kube.apply(resource(size=1, maxSize=4, autoscale={}))
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    for _ in range(100):
        fake.reconcile()
        pods = fake.objects(kinds=("Pod",))
        if pods and pods[0]["status"]["phase"] == "Running":
            break
    monkeypatch.setattr(handlers, "leads", {})
    handlers.on_pod(body=pods[0], namespace="default", type="MODIFIED")
    scraped = []

    def looked(kube, cr, now, lead, scrape=None, previous=None):
        scraped.append((lead(), scrape(lead(), 9408) if scrape else None))
        return Tick()

    waits = []

    def waited(cr, namespace, pod, after, *, now, most):
        waits.append((after, most))
        return (lambda pod, port: {"version": "v2"}), "v2"

    monkeypatch.setattr(handlers, "autoscale", looked)
    monkeypatch.setattr(handlers, "waited", waited)
    monkeypatch.setattr(handlers, "versions", {("default", "demo"): "v1"})
    before = len(fake.requests)
    handlers.on_autoscale(body=fake.get("MiniCluster", "demo"), namespace="default")
    assert scraped == [(pods[0], {"version": "v2"})] and waits == [("v1", 10.0)]
    assert handlers.versions[("default", "demo")] == "v2"  # the next look waits after it
    # no request: rank 0 from the pod watch, the resource from kopf's live body
    assert fake.requests[before:] == []
    monkeypatch.setattr(handlers, "leads", {})  # not seen: one list
    before = len(fake.requests)
    handlers.on_autoscale(body=fake.get("MiniCluster", "demo"), namespace="default")
    assert scraped[-1][0]["metadata"]["name"] == pods[0]["metadata"]["name"]
    assert [str(r) for r in fake.requests[before:]] == ["GET pods"]


def test_looks_without_a_long_poll_are_as_far_apart_as_one(fake, connected, kube, monkeypatch):
    """Metrics read by exec: a look every wait_for_change seconds, not every tick."""
    looks = []
    monkeypatch.setattr(handlers, "waited", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        handlers, "autoscale", lambda kube, cr, now, lead: looks.append(cr) or Tick()
    )
    monkeypatch.setattr(handlers, "unwaited", {})
    monkeypatch.setattr(handlers, "leads", {("default", "demo"): lead("demo-0-a")})
    body = resource(maxSize=4, autoscale={})
    handlers.on_autoscale(body=body, namespace="default")
    handlers.on_autoscale(body=body, namespace="default")
    assert len(looks) == 1
    monkeypatch.setattr(handlers, "wait_for_change", 0.0)
    handlers.on_autoscale(body=body, namespace="default")
    assert len(looks) == 2


def test_a_look_waits_for_the_watch_to_bring_its_own_resize(monkeypatch):
    """kopf's live body may lag behind what the last look wrote: a look on a
    body older than its own resize waits for the next one, and the idle time
    it recorded is taken from what it wrote, not from the stale body."""
    calls = []

    def looked(kube, cr, now, lead, scrape=None, previous=None):
        calls.append(previous)
        return Tick(status={"desiredSize": 4, "reason": "grown"}, generation=3)

    monkeypatch.setattr(
        handlers, "connect", lambda namespace: type("K", (), {"close": lambda s: None})()
    )
    monkeypatch.setattr(handlers, "autoscale", looked)
    monkeypatch.setattr(handlers, "waited", lambda *a, **k: ((lambda pod, port: {}), "v"))
    monkeypatch.setattr(handlers, "leads", {("default", "demo"): lead("demo-0-a")})
    monkeypatch.setattr(handlers, "remembered", {})
    body = resource(maxSize=4, autoscale={})
    body["metadata"].update(uid="u1", generation=2)
    handlers.on_autoscale(body=body, namespace="default")  # it resizes: generation 3
    handlers.on_autoscale(body=body, namespace="default")  # the watch still says 2
    assert calls == [None]
    body["metadata"]["generation"] = 3
    handlers.on_autoscale(body=body, namespace="default")
    assert calls == [None, {"desiredSize": 4, "reason": "grown"}]
    body["metadata"].update(uid="u2", generation=1)  # deleted and made again
    handlers.on_autoscale(body=body, namespace="default")
    assert calls[-1] is None


def test_without_a_job_journal_looks_are_not_every_tick(monkeypatch):
    """Rank 0 answers with no version (a flux-core without the journal): it
    cannot wait for a change, so a look is at most one per long poll's time."""
    looks = []

    def looked(kube, cr, now, lead, scrape=None, previous=None):
        looks.append(now)
        return Tick()

    monkeypatch.setattr(
        handlers, "connect", lambda namespace: type("K", (), {"close": lambda s: None})()
    )
    monkeypatch.setattr(handlers, "autoscale", looked)
    monkeypatch.setattr(handlers, "waited", lambda *a, **k: ((lambda pod, port: {}), None))
    monkeypatch.setattr(handlers, "leads", {("default", "demo"): lead("demo-0-a")})
    monkeypatch.setattr(handlers, "unwaited", {})
    body = resource(maxSize=4, autoscale={})
    for _ in range(3):
        handlers.on_autoscale(body=body, namespace="default")
    assert len(looks) == 1
