"""The operator's timers (autoscaling and health looks), called as plain
functions against the fake API server."""

from __future__ import annotations

import kopf
import pytest

from fluxhop.operator import handlers, memory, timers
from fluxhop.operator.autoscale_timer import Tick
from fluxhop.operator.resource import FIELD_MANAGER
from tests.operator.test_handlers import lead
from tests.operator.test_reconcile import resource


def test_the_timer_looks_only_at_operated_resources_that_autoscale(monkeypatch):
    monkeypatch.setattr(handlers, "selector", {})
    body = resource(maxSize=4, autoscale={})
    assert not timers._autoscaled(body)  # not reconciled by fluxhop's operator yet
    body["metadata"]["annotations"] = {"fluxhop.io/operated-by": FIELD_MANAGER}
    assert timers._autoscaled(body)
    del body["spec"]["autoscale"]
    assert not timers._autoscaled(body)


def test_the_timer_is_registered_with_its_interval():
    registry = kopf.OperatorRegistry()
    timers.register_autoscaling(0.5, registry=registry)
    (timer,) = [h for h in registry._spawning.get_all_handlers() if h.id == "autoscale"]
    assert timer.interval == 0.5 and timer.fn is timers.on_autoscale


@pytest.mark.parametrize("register", [timers.register_autoscaling, timers.register_health])
def test_no_timer_puts_a_finalizer_on_the_resource(register):
    """kopf's timers ask for a finalizer on what they look at: a stopped
    operator would leave those MiniClusters undeletable (#57)."""
    registry = kopf.OperatorRegistry()
    register(1.0, registry=registry)
    (timer,) = registry._spawning.get_all_handlers()
    assert timer.requires_finalizer is False
    assert timer.interval == 1.0 and timer.id in ("autoscale", "health")


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
    monkeypatch.setattr(memory, "leads", {})
    handlers.on_pod(body=pods[0], namespace="default", type="MODIFIED")
    scraped = []

    def looked(kube, cr, now, lead, scrape=None, previous=None):
        scraped.append((lead(), scrape(lead(), 9408) if scrape else None))
        return Tick()

    waits = []

    def waited(cr, namespace, pod, after, *, now, most):
        waits.append((after, most))
        return (lambda pod, port: {"version": "v2"}), "v2"

    monkeypatch.setattr(timers, "autoscale", looked)
    monkeypatch.setattr(timers, "waited", waited)
    monkeypatch.setattr(memory, "versions", {("default", "demo"): "v1"})
    before = len(fake.requests)
    timers.on_autoscale(body=fake.get("MiniCluster", "demo"), namespace="default")
    assert scraped == [(pods[0], {"version": "v2"})] and waits == [("v1", 10.0)]
    assert memory.versions[("default", "demo")] == "v2"  # the next look waits after it
    # no request: rank 0 from the pod watch, the resource from kopf's live body
    assert fake.requests[before:] == []
    monkeypatch.setattr(memory, "leads", {})  # not seen: one list
    before = len(fake.requests)
    timers.on_autoscale(body=fake.get("MiniCluster", "demo"), namespace="default")
    assert scraped[-1][0]["metadata"]["name"] == pods[0]["metadata"]["name"]
    assert [str(r) for r in fake.requests[before:]] == ["GET pods"]


def test_looks_without_a_long_poll_are_as_far_apart_as_one(fake, connected, kube, monkeypatch):
    """Metrics read by exec: a look every wait_for_change seconds, not every tick."""
    looks = []
    monkeypatch.setattr(timers, "waited", lambda *args, **kwargs: None)
    monkeypatch.setattr(timers, "autoscale", lambda kube, cr, now, lead: looks.append(cr) or Tick())
    monkeypatch.setattr(memory, "unwaited", {})
    monkeypatch.setattr(memory, "leads", {("default", "demo"): lead("demo-0-a")})
    body = resource(maxSize=4, autoscale={})
    timers.on_autoscale(body=body, namespace="default")
    timers.on_autoscale(body=body, namespace="default")
    assert len(looks) == 1
    monkeypatch.setattr(memory, "wait_for_change", 0.0)
    timers.on_autoscale(body=body, namespace="default")
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
    monkeypatch.setattr(timers, "autoscale", looked)
    monkeypatch.setattr(timers, "waited", lambda *a, **k: ((lambda pod, port: {}), "v"))
    monkeypatch.setattr(memory, "leads", {("default", "demo"): lead("demo-0-a")})
    monkeypatch.setattr(memory, "remembered", {})
    body = resource(maxSize=4, autoscale={})
    body["metadata"].update(uid="u1", generation=2)
    timers.on_autoscale(body=body, namespace="default")  # it resizes: generation 3
    timers.on_autoscale(body=body, namespace="default")  # the watch still says 2
    assert calls == [None]
    body["metadata"]["generation"] = 3
    timers.on_autoscale(body=body, namespace="default")
    assert calls == [None, {"desiredSize": 4, "reason": "grown"}]
    body["metadata"].update(uid="u2", generation=1)  # deleted and made again
    timers.on_autoscale(body=body, namespace="default")
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
    monkeypatch.setattr(timers, "autoscale", looked)
    monkeypatch.setattr(timers, "waited", lambda *a, **k: ((lambda pod, port: {}), None))
    monkeypatch.setattr(memory, "leads", {("default", "demo"): lead("demo-0-a")})
    monkeypatch.setattr(memory, "unwaited", {})
    body = resource(maxSize=4, autoscale={})
    for _ in range(3):
        timers.on_autoscale(body=body, namespace="default")
    assert len(looks) == 1
