"""The operator's autoscaling look (operator/autoscale_timer.py) against the fake
API server: a MiniCluster resource with spec.autoscale, reconciled by
fluxhop's operator, whose rank 0 answers metrics from the test and runs
exec'd flux commands through lightkube's exec (tests/cluster/fakeexec.py).
What it writes, when, and that a look that changes nothing writes nothing.
With real Flux and a real API server: tests/realk8s/test_operator_autoscale.py."""

from __future__ import annotations

import json

import pytest

from fluxhop.operator.autoscale_timer import autoscale
from fluxhop.operator.reconcile import Reconciler
from fluxhop.operator.resource import AUTOSCALE_STATUS
from fluxhop.workload.autoscale import DRAIN_REASON
from fluxhop.workload.status import running_lead
from tests.cluster.fakeapi import KUEUE_KINDS
from tests.cluster.kueue import Kueue
from tests.cluster.rank0 import metrics
from tests.operator.test_reconcile import current, events, resource, settle

DELAY = 60


@pytest.fixture
def up(fake, kube, ops, rank0):
    """Reconcile a resource (size 1, maxSize 4, autoscale) until Ready;
    ``up(**spec)`` for another spec."""

    def make(**spec):
        spec = {"maxSize": 4, "autoscale": {"scaleDownDelaySeconds": DELAY}, **spec}
        kube.apply(resource(size=spec.pop("size", 1), **spec))
        settle(fake, Reconciler(ops))
        return current(fake)

    return make


def look(fake, kube, rank0, now: float, cr: dict | None = None):
    pods = [p for p in fake.objects(kinds=("Pod",))]
    return autoscale(kube, cr or current(fake), now=now, lead=lambda: running_lead(pods),
                     scrape=rank0.scrape)  # fmt: skip


def recorded(fake) -> dict:
    return current(fake)["status"][AUTOSCALE_STATUS]


def test_pending_work_grows_the_resource_and_the_reconcile_resizes_its_job(
    fake, kube, ops, rank0, up
):
    up()
    rank0.now = metrics(pending=4)
    tick = look(fake, kube, rank0, 1000)
    assert tick.decision.size == 4
    assert tick.writes == ["patch status.autoscale", "event ScaledUp"]
    assert current(fake)["spec"]["size"] == 4  # as the scale subresource and an HPA do
    assert recorded(fake)["desiredSize"] == 4 and "growing to 4" in recorded(fake)["reason"]
    assert ("Normal", "ScaledUp") in events(fake)
    Reconciler(ops).reconcile(current(fake))
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 4


def test_a_look_that_changes_nothing_sends_nothing(fake, kube, rank0, up):
    up(size=4)
    look(fake, kube, rank0, 1000)  # the idle time starts: recorded
    assert recorded(fake)["idleSince"] == "1970-01-01T00:16:40Z"
    before = len(fake.requests)
    for now in (1010, 1020, 1030):  # the delay counts down under the same reason
        assert look(fake, kube, rank0, now).writes == []
    assert fake.requests[before:] == [] and rank0.scrapes == 4


def test_idle_past_the_delay_it_drains_then_shrinks_and_a_restart_keeps_the_clock(
    fake, kube, rank0, up
):
    up(size=4)
    rank0.now = metrics(allocated="0")
    look(fake, kube, rank0, 1000)
    # another replica or a restarted operator: the idle time is on the resource
    tick = look(fake, kube, rank0, 1000 + DELAY)
    assert sorted(tick.decision.drain) == [1, 2, 3]
    assert rank0.ran == [["resource", "drain", "--update", "1-3", DRAIN_REASON]]
    assert current(fake)["spec"]["size"] == 4  # not until the drained ranks are idle
    rank0.now = metrics(allocated="0,3", drained="1-3")
    assert look(fake, kube, rank0, 1000 + 2 * DELAY).decision.size == 4  # a job on rank 3
    rank0.now = metrics(allocated="0", drained="1-3")
    tick = look(fake, kube, rank0, 1000 + 3 * DELAY)
    assert tick.decision.size == 1 and "event ScaledDown" in tick.writes
    assert current(fake)["spec"]["size"] == 1
    assert "idleSince" not in recorded(fake)  # the shrink is done: no idle time left
    assert [r for _, r in events(fake) if r in ("Draining", "ScaledDown")] == [
        "Draining",
        "ScaledDown",
    ]


def test_the_reconcile_leaves_the_autoscalers_status_alone(fake, kube, ops, rank0, up):
    up()
    rank0.now = metrics(pending=2)
    look(fake, kube, rank0, 1000)
    settle(fake, Reconciler(ops))
    assert recorded(fake)["desiredSize"] == 2
    assert current(fake)["status"]["size"] == 2


def test_without_served_metrics_it_reads_them_by_exec(fake, kube, rank0, up):
    up(metrics={"enabled": False})
    rank0.now = metrics(pending=3)
    assert look(fake, kube, rank0, 1000).decision.size == 3
    assert rank0.scrapes == 0
    (call,) = rank0.ran
    assert (
        call[0] == "python" and call[1].endswith("/metrics.py") and call[2:] == ["--once", "--json"]
    )


def test_rank_0_not_running_is_said_once_and_nothing_else_happens(fake, kube, rank0, up):
    up()
    cr = current(fake)
    tick = autoscale(kube, cr, now=1000, lead=lambda: None, scrape=rank0.scrape)
    assert tick.decision is None and tick.writes == ["patch status.autoscale"]
    assert recorded(fake) == {"desiredSize": 1, "reason": "waiting for rank 0 to run"}
    tick = autoscale(kube, current(fake), now=1010, lead=lambda: None, scrape=rank0.scrape)
    assert tick.writes == []


def test_unreadable_metrics_stall_it_with_one_warning(fake, kube, rank0, up):
    up()

    def refused(pod, port):
        from fluxhop.errors import InstanceError

        raise InstanceError("cannot read the metrics at http://10.0.0.1:9408/metrics.json")

    pods = fake.objects(kinds=("Pod",))
    autoscale(kube, current(fake), now=900, lead=lambda: running_lead(pods), scrape=refused)
    assert recorded(fake)["reason"].startswith("no decision: cannot read the metrics")
    assert ("Warning", "AutoscaleStalled") not in events(fake)  # its instance is starting
    look(fake, kube, rank0, 950)  # it decides
    for now in (1000, 1010):
        autoscale(kube, current(fake), now=now, lead=lambda: running_lead(pods), scrape=refused)
    assert recorded(fake)["reason"].startswith("no decision: cannot read the metrics")
    assert [e for e in events(fake) if e[1] == "AutoscaleStalled"] == [
        ("Warning", "AutoscaleStalled")
    ]


@pytest.mark.parametrize("fake", [KUEUE_KINDS], indirect=True)
def test_under_kueue_an_admitted_workload_is_not_resized(fake, kube, ops, rank0):
    queued = {"kueue.x-k8s.io/queue-name": "team-a"}
    kube.apply(resource(size=1, maxSize=4, autoscale={}, jobLabels=queued))
    Reconciler(ops).reconcile(current(fake))  # queued: held in its Workload
    Kueue(fake).reserve("demo")
    settle(fake, Reconciler(ops))
    rank0.now = metrics(pending=4)
    look(fake, kube, rank0, 1000)
    assert current(fake)["spec"]["size"] == 1  # as fluxhop scale and the reconcile refuse it
    assert "cannot resize to 4: MiniCluster demo was admitted by Kueue" in recorded(fake)["reason"]


def test_a_resource_that_does_not_autoscale_is_not_looked_at(fake, kube, ops, rank0):
    kube.apply(resource(size=1, maxSize=4))
    settle(fake, Reconciler(ops))
    before = len(fake.requests)
    assert look(fake, kube, rank0, 1000).writes == []
    assert fake.requests[before:] == [] and rank0.scrapes == 0


def test_the_operators_namespace_may_read_the_metrics_of_those_it_autoscales(fake, kube, ops):
    kube.apply(resource(size=1, maxSize=4, autoscale={}))
    Reconciler(ops, operator_namespace="fluxhop-system").reconcile(current(fake))
    policy = fake.get("NetworkPolicy", "demo-flux-broker")
    readers = [
        expression["values"]
        for rule in policy["spec"]["ingress"]
        for peer in rule.get("from", [])
        for expression in peer.get("namespaceSelector", {}).get("matchExpressions", [])
    ]
    assert readers == [["default", "fluxhop-system"]]
    kube.apply(resource(name="plain", size=1, maxSize=4))  # no autoscale: only its own
    Reconciler(ops, operator_namespace="fluxhop-system").reconcile(current(fake, "plain"))
    policy = fake.get("NetworkPolicy", "plain-flux-broker")
    assert "fluxhop-system" not in json.dumps(policy)


def test_a_look_waits_at_rank_0_for_the_queue_to_change(fake, kube, rank0, up):
    from fluxhop.operator.autoscale_timer import waited

    cr = up(size=4)
    pod = running_lead(fake.objects(kinds=("Pod",)))
    asked = []

    def scrape(pod, port, *, after, wait):
        asked.append((port, after, wait))
        return {**metrics(), "version": "v2"}

    scrape_, version = waited(cr, "default", pod, "v1", now=1000, most=10, scrape=scrape)
    assert asked == [(9408, "v1", 10)] and version == "v2"
    assert scrape_(pod, 9408)["version"] == "v2"  # the look reads what the wait answered
    look(fake, kube, rank0, 1000)  # idle from 1000, the delay 60
    waited(current(fake), "default", pod, "v2", now=1055, most=10, scrape=scrape)
    assert asked[-1][2] == 5  # not past the end of the delay, when a shrink is due
    waited(current(fake), "default", pod, "v2", now=1070, most=10, scrape=scrape)
    assert asked[-1][2] == 10  # run out: what a shrink waits for now is a job's end


def test_without_served_metrics_there_is_no_waiting(fake, kube, rank0, up):
    from fluxhop.operator.autoscale_timer import waited

    cr = up(metrics={"enabled": False})
    pod = running_lead(fake.objects(kinds=("Pod",)))
    assert waited(cr, "default", pod, None, now=0, most=10, scrape=None) is None
