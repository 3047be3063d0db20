"""The operator's health look (operator/health_watch.py) against the fake
API server: a MiniCluster resource with spec.health, reconciled by fluxhop's
operator, whose rank 0 answers metrics from the test. status.health follows
them; a rank health drains is a Drained event, one it no longer holds a
Recovered event, each said once; a look that changes nothing writes
nothing. With real Flux and a real API server: tests/realk8s/test_health.py."""

from __future__ import annotations

import json

import pytest

from fluxhop.operator.health_watch import (
    HEALTH_STATUS,
    REPLACED,
    UNHEALTHY,
    changes,
    health_status,
    look,
    to_replace,
)
from fluxhop.operator.reconcile import Reconciler
from fluxhop.workload.status import running_lead
from tests.cluster.rank0 import metrics
from tests.operator.test_reconcile import current, events, resource, settle

CHECKS = {"checks": [{"name": "gpus", "command": "fluxhop_gpus"}]}
SICK = "health: gpus: 3 of 4 GPUs present"


def sick(*ranks: int, admin: str = "") -> dict:
    """metrics.py's JSON with health's drain on ``ranks`` (and an admin's on ``admin``)."""
    found = metrics()
    drains = [{"ranks": ",".join(map(str, ranks)), "reason": SICK}] if ranks else []
    if admin:
        drains.append({"ranks": admin, "reason": "maintenance"})
    found["ranks"]["drain"] = drains
    found["health_checks"] = {"gpus": {"pass": 4 - len(ranks), "fail": len(ranks)}}
    if ranks:
        found["health"] = {
            "gpus": {"failing": ",".join(map(str, ranks)), "line": "3 of 4 GPUs present"}
        }
    return found


def test_the_status_from_the_metrics():
    status = health_status(sick(1, 3, admin="2"))
    assert status == {
        "checks": [{"name": "gpus", "passing": 2, "failing": 2, "failingRanks": "1,3",
                    "lastFailure": "3 of 4 GPUs present"}],
        "drained": [{"rank": 1, "reason": SICK}, {"rank": 3, "reason": SICK}],
    }  # fmt: skip
    # a metrics.py from before spec.health: nothing to say
    assert health_status(metrics()) == {"checks": [], "drained": []}


def test_the_events_between_two_looks():
    before, after = health_status(sick(1)), health_status(sick(3))
    assert changes(before, after) == [
        ("Warning", "Drained", f"rank 3 drained: {SICK}"),
        ("Normal", "Recovered", "rank 1 is no longer drained by its health checks"),
    ]
    assert changes(after, after) == []


@pytest.fixture
def checked(fake, kube, ops, rank0):
    kube.apply(resource(size=4, health=CHECKS))
    settle(fake, Reconciler(ops))
    return current(fake)


def look_once(fake, kube, rank0, previous=None):
    pods = list(fake.objects(kinds=("Pod",)))
    return look(kube, current(fake), running_lead(pods), previous, scrape=rank0.scrape)


def test_a_drain_and_its_recovery_are_status_and_events(fake, kube, rank0, checked):
    rank0.now = sick(2)
    behind = current(fake)  # kopf's body, before the look's write
    written = look_once(fake, kube, rank0)
    assert current(fake)["status"][HEALTH_STATUS] == written
    assert written["drained"] == [{"rank": 2, "reason": SICK}]
    assert events(fake).count(("Warning", "Drained")) == 1
    # the next look, with kopf's body behind this write: said once all the same
    pods = list(fake.objects(kinds=("Pod",)))
    look(kube, behind, running_lead(pods), written, scrape=rank0.scrape)
    assert events(fake).count(("Warning", "Drained")) == 1
    rank0.now = sick()
    look_once(fake, kube, rank0, previous=written)
    assert current(fake)["status"][HEALTH_STATUS]["drained"] == []
    assert ("Normal", "Recovered") in events(fake)


def test_a_look_that_changes_nothing_writes_nothing(fake, kube, rank0, checked):
    rank0.now = sick(1)
    look_once(fake, kube, rank0)
    version = current(fake)["metadata"]["resourceVersion"]
    look_once(fake, kube, rank0)
    assert current(fake)["metadata"]["resourceVersion"] == version


def test_without_health_or_rank_0_there_is_no_look(fake, kube, ops, rank0):
    kube.apply(resource(size=2))
    settle(fake, Reconciler(ops))
    assert look_once(fake, kube, rank0) is None
    assert look(kube, current(fake), None, scrape=rank0.scrape) is None
    assert rank0.scrapes == 0


REPLACE = {"onFailure": "replace", "checks": [{"name": "gpus", "command": "fluxhop_gpus",
                                               "intervalSeconds": 5, "timeoutSeconds": 5}]}  # fmt: skip
LATER = 10**10  # "now", long after every pod started (past the checks' first round)


def pod(rank: int, *, started: str = "2026-01-01T00:00:00Z", phase: str = "Running") -> dict:
    return {
        "metadata": {"name": f"demo-{rank}-x", "labels": {
            "job-name": "demo", "batch.kubernetes.io/job-completion-index": str(rank)}},
        "spec": {"nodeName": f"node-{rank}"},
        "status": {"phase": phase, "startTime": started},
    }  # fmt: skip


def replace_spec(**health):
    from fluxhop.spec import MiniCluster

    return MiniCluster.from_dict(resource(size=4, health={**REPLACE, **health}))


@pytest.mark.parametrize(
    ("drained", "pods", "busy", "health", "now", "chosen"),
    [
        ([1, 2], [0, 1, 2, 3], "", {}, LATER, [1]),  # maxReplacements 1: one at a time
        ([1, 2], [0, 1, 2, 3], "", {"maxReplacements": 2}, LATER, [1, 2]),
        ([1, 2], [0, 2, 3], "", {"maxReplacements": 2}, LATER, [2]),  # rank 1's already going
        ([0], [0, 1, 2, 3], "", {}, LATER, []),  # never rank 0's: the instance is there
        ([1], [0, 1, 2, 3], "1", {}, LATER, []),  # a job runs on it
        ([1], [0, 1, 2, 3], "", {"onFailure": "drain"}, LATER, []),
        # younger than the checks' first round (interval + timeout + 10 s after it started)
        ([1], [0, 1, 2, 3], "", {}, 1767225600 + 19, []),
        ([1], [0, 1, 2, 3], "", {}, 1767225600 + 21, [1]),
    ],
)  # fmt: skip
def test_which_pods_are_replaced(drained, pods, busy, health, now, chosen):
    status = {"drained": [{"rank": r, "reason": SICK} for r in drained]}
    found = metrics()
    found["sched"] = {**found.get("sched", {}), "allocated": busy}
    replaced = to_replace(replace_spec(**health), status, found, [pod(r) for r in pods], now)
    assert [r.rank for r in replaced] == chosen
    assert all(r.node == f"node-{r.rank}" and r.reason == SICK for r in replaced)


def test_a_replacement_taints_the_node_records_why_and_evicts(fake, kube, ops, rank0):
    fake.seed("Node", {"metadata": {"name": "node-1"},
                       "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}},
              namespace="")  # fmt: skip
    kube.apply(resource(size=4, health=REPLACE))
    settle(fake, Reconciler(ops))
    rank0.now = sick(2)
    pods = list(fake.objects(kinds=("Pod",)))
    rank2 = next(p for p in pods if p["metadata"]["name"].startswith("demo-2-"))
    look(kube, current(fake), running_lead(pods), scrape=rank0.scrape, now=LATER)
    node = fake.get("Node", "node-1", namespace="")
    assert node["spec"]["taints"] == [
        {"key": "other", "effect": "NoSchedule"},
        {"key": UNHEALTHY, "value": "demo", "effect": "NoSchedule"},
    ]
    assert node["metadata"]["annotations"][REPLACED] == f"default/demo rank 2: {SICK}"
    assert ("Warning", "Replaced") in events(fake)
    gone = fake.get("Pod", rank2["metadata"]["name"])
    assert gone is None or gone["metadata"].get("deletionTimestamp")  # evicted
    # the Job makes rank 2 again: no second replacement while it has no running pod
    look(kube, current(fake), running_lead(pods), scrape=rank0.scrape, now=LATER)
    assert events(fake).count(("Warning", "Replaced")) == 1


def test_the_operators_namespace_may_read_the_metrics_of_those_it_checks(fake, kube, ops):
    kube.apply(resource(size=2, health=CHECKS))
    Reconciler(ops, operator_namespace="fluxhop-system").reconcile(current(fake))
    policy = fake.get("NetworkPolicy", "demo-flux-broker")
    assert "fluxhop-system" in json.dumps(policy)


def test_the_reconcile_leaves_status_health_alone(fake, kube, rank0, ops, checked):
    rank0.now = sick(1)
    look_once(fake, kube, rank0)
    version = current(fake)["metadata"]["resourceVersion"]
    Reconciler(ops).reconcile(current(fake))
    assert current(fake)["metadata"]["resourceVersion"] == version  # nothing else changed
    assert current(fake)["status"][HEALTH_STATUS]["drained"] == [{"rank": 1, "reason": SICK}]
