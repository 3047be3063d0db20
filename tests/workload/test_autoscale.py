"""The autoscaling policy as a table: queue states in, desired sizes and the
drains that come first out - the bounds, the delay, the drain waits."""

from __future__ import annotations

import pytest

from fluxhop.errors import InstanceError
from fluxhop.render.targets import Target
from fluxhop.spec import MiniCluster
from fluxhop.workload.autoscale import DRAIN_REASON, Observation, Policy, State, decide, observe
from fluxhop.workload.marks import AUTOSCALE, prepare
from fluxhop.workload.root import Root
from tests.documents import minicluster_doc

POLICY = Policy(min_size=1, max_size=4, scale_down_delay=60)


def seen(size, allocated=(), pending=0, largest=None, drained=(), online=None):
    return Observation(
        size=size,
        allocated=frozenset(allocated),
        pending_nodes=pending,
        pending_max_nodes=pending if largest is None else largest,
        drained=frozenset(drained),
        online=None if online is None else frozenset(online),
    )


# (observation, idle since, now) -> (size, drain, undrain, idle since after, words in the reason)
CASES = {
    "idle at minSize": (seen(1), None, 0, (1, (), (), None, "minSize")),
    "a 4-node job grows 1 to 4": (seen(1, pending=4), None, 0, (4, (), (), None, "growing to 4")),
    "never beyond maxSize": (
        seen(1, pending=6, largest=6),
        None,
        0,
        (4, (), (), None, "more than maxSize 4"),
    ),
    "busy plus pending": (
        seen(2, allocated=[0, 1], pending=1),
        None,
        0,
        (3, (), (), None, "2 in use"),
    ),
    "the largest request decides": (
        seen(1, pending=3, largest=3),
        None,
        0,
        (3, (), (), None, "growing to 3"),
    ),
    "pending jobs that fit: no growth": (
        seen(4, allocated=[0], pending=2),
        None,
        0,
        (4, (), (), None, "fit"),
    ),
    "growth undrains what a shrink drained": (
        seen(4, allocated=[], pending=4, drained=[1, 2, 3]),
        10,
        80,
        (4, (), (1, 2, 3), None, "undraining"),
    ),
    "growth past drained ranks whose brokers left undrains them": (
        seen(1, pending=4, drained=[1, 2, 3], online=[0]),
        None,
        0,
        (4, (), (1, 2, 3), None, "growing to 4"),
    ),
    "growth right after a shrink: ranks still leaving stay drained": (
        seen(1, pending=4, drained=[1, 2, 3], online=[0, 1, 2, 3]),
        None,
        0,
        (4, (), (), None, "growing to 4"),
    ),
    "idle: the delay starts": (
        seen(4, allocated=[0]),
        None,
        100,
        (4, (), (), 100, "once idle for 60s"),
    ),
    "idle: still within the delay": (seen(4), 100, 130, (4, (), (), 100, "once idle for 60s")),
    "idle past the delay: drain first": (
        seen(4),
        100,
        160,
        (4, (1, 2, 3), (), 100, "draining ranks 1-3"),
    ),
    "a job on rank 3: drained, waits for it": (
        seen(4, allocated=[3], drained=[1, 2, 3]),
        100,
        400,
        (4, (), (), 100, "ranks 3 to end"),
    ),
    "a job on rank 3 drained late: drains and waits": (
        seen(4, allocated=[3]),
        100,
        400,
        (4, (1, 2, 3), (), 100, "waiting for the job"),
    ),
    "a job on a drained rank ends: the shrink goes on without another delay": (
        seen(4, allocated=[0], drained=[1, 2, 3]),
        100,
        170,
        (1, (), (), None, "shrinking to 1"),
    ),
    "jobs on rank 0 and on drained rank 3: waits, the target stays": (
        seen(4, allocated=[0, 3], drained=[1, 2, 3]),
        100,
        400,
        (4, (), (), 100, "ranks 3 to end"),
    ),
    "its job ended: shrink": (
        seen(4, drained=[1, 2, 3]),
        100,
        500,
        (1, (), (), None, "shrinking to 1"),
    ),
    "the nodes in use stay": (
        seen(4, allocated=[0, 1], drained=[2, 3]),
        0,
        100,
        (2, (), (), None, "shrinking to 2"),
    ),
    "shrunk, the drained ranks' brokers gone: undrained for the next growth": (
        seen(1, drained=[1, 2, 3], online=[0]),
        None,
        0,
        (1, (), (1, 2, 3), None, "minSize"),
    ),
    "shrunk, a drained rank's broker still leaving: it stays drained": (
        seen(1, drained=[1, 2, 3], online=[0, 3]),
        None,
        0,
        (1, (), (1, 2), None, "minSize"),
    ),
    "a size outside the bounds comes back": (seen(6), None, 0, (4, (), (), None, "outside 1-4")),
    "steady: leftover drains below the size are undone": (
        seen(2, allocated=[0, 1], drained=[1, 3]),
        None,
        0,
        (2, (), (1,), None, "every node in use"),
    ),
}


@pytest.mark.parametrize(("observation", "since", "now", "expected"), CASES.values(), ids=CASES)
def test_the_policy(observation, since, now, expected):
    size, drain, undrain, after, words = expected
    decision, state = decide(POLICY, observation, State(since, None if since is None else 1), now)
    assert (decision.size, sorted(decision.drain), sorted(decision.undrain)) == (
        size,
        list(drain),
        list(undrain),
    )
    assert state.idle_since == after
    assert words in decision.reason, decision.reason


def test_the_wait_counts_down_under_a_reason_that_stays_the_same():
    first, state = decide(POLICY, seen(4), State(), 100)
    later, _ = decide(POLICY, seen(4), state, 130)
    assert (first.wait, later.wait) == (60, 30)
    assert first.reason == later.reason  # a status holding it is not rewritten each time
    assert decide(POLICY, seen(4), state, 160)[0].wait is None


def test_a_job_on_a_drained_rank_does_not_restart_the_delay_for_the_others():
    """Jobs on ranks 0 and 3 of 4 when the delay ran out: ranks 2-3 drained;
    then rank 1, idle all along, joins the shrink at once, and the shrink
    goes on as soon as rank 3's job ends - one delay in all."""
    decision, state = decide(POLICY, seen(4, allocated=[0, 3]), State(), 0)
    assert decision.wait == 60 and state.target == 2
    decision, state = decide(POLICY, seen(4, allocated=[0, 3]), state, 60)
    assert sorted(decision.drain) == [2, 3]
    decision, state = decide(POLICY, seen(4, allocated=[0, 3], drained=[2, 3]), state, 61)
    assert sorted(decision.drain) == [1] and state.idle_since == 0
    decision, state = decide(POLICY, seen(4, allocated=[0], drained=[1, 2, 3]), state, 62)
    assert decision.size == 1


def test_min_size_bounds_the_shrink():
    decision, _ = decide(Policy(2, 4, 60), seen(4), State(0, 2), 100)
    assert (decision.size, sorted(decision.drain)) == (4, [2, 3])
    decision, _ = decide(Policy(2, 4, 60), seen(4, drained=[2, 3]), State(0, 2), 100)
    assert decision.size == 2


def test_jobs_that_ask_only_for_cores_count_as_the_nodes_those_need():
    seen_ = observe(1, metrics(cores=10, most_cores=9))  # 4 cores a node
    assert (seen_.pending_nodes, seen_.pending_max_nodes) == (3, 3)
    assert decide(POLICY, seen_, State(), 0)[0].size == 3


def test_an_admins_drain_does_not_stall_a_shrink():
    observation = seen(4, drained=[1, 2])
    observation = Observation(**{**observation.__dict__, "drained_by_others": frozenset({3})})
    decision, _ = decide(POLICY, observation, State(0, 1), 100)
    assert decision.size == 1 and not decision.undrain  # 3 stays the admin's


def test_a_health_check_on_a_leaving_rank_holds_the_shrink_not_the_idle_time():
    checking = Observation(**{**seen(4, drained=[1, 2, 3]).__dict__, "checking": frozenset({2})})
    decision, state = decide(POLICY, checking, State(0, 1), 100)
    assert decision.size == 4 and "waiting for the job(s) on ranks 2" in decision.reason
    assert state.idle_since == 0  # the check made no node busy
    done = Observation(**{**checking.__dict__, "checking": frozenset()})
    assert decide(POLICY, done, state, 101)[0].size == 1


def test_nodes_that_just_became_idle_wait_the_whole_delay():
    _, state = decide(POLICY, seen(4, allocated=[0, 1, 2]), State(), 0)  # idle: rank 3
    assert state == State(0, 3)
    decision, state = decide(POLICY, seen(4, allocated=[0]), state, 59)  # 1-3 idle now
    assert decision.size == 4 and not decision.drain and state == State(59, 1)
    decision, _ = decide(POLICY, seen(4, allocated=[0]), state, 119)
    assert decision.drain == frozenset({1, 2, 3})


def test_a_scale_down_never_leaves_a_running_job_without_its_node():
    """Walk every small state: a decision that lowers the size keeps every
    allocated rank below the new size."""
    for size in range(1, 5):
        for mask in range(1 << size):
            allocated = {r for r in range(size) if mask >> r & 1}
            for drained in ((), tuple(range(1, size))):
                observation = seen(size, allocated=allocated, drained=drained)
                decision, _ = decide(POLICY, observation, State(0), 10_000)
                assert all(rank < decision.size for rank in allocated), (observation, decision)


def metrics(allocated="", drain=(), pending=0, largest=0, cores=0, most_cores=0):
    return {
        "pending_nodes": pending,
        "pending_max_nodes": largest,
        "pending_cores": cores,
        "pending_max_cores": most_cores,
        "nodes": {"free": 1, "allocated": 0, "down": 3},
        "cores": {"free": 4, "allocated": 0, "down": 12},  # 4 per node
        "ranks": {"online": "0-3", "allocated": allocated, "drain": list(drain)},
    }


def test_the_observation_is_read_from_the_metrics_json():
    ours = {"ranks": "2-3", "reason": DRAIN_REASON}
    admins = {"ranks": "1", "reason": "bad disk"}  # never undrained by the policy
    seen_ = observe(4, metrics("0,3", [ours, admins], pending=2, largest=2))
    assert seen_ == Observation(
        4, frozenset({0, 3}), 2, 2, frozenset({2, 3}), frozenset({1}), frozenset({0, 1, 2, 3})
    )
    assert observe(1, metrics()).allocated == frozenset()


@pytest.mark.parametrize(
    "bad",
    [None, {}, {"ranks": "0"}, {**metrics(), "pending_nodes": "x"}, metrics(allocated="3-1")],
)
def test_metrics_without_what_it_needs_are_one_line(bad):
    with pytest.raises(InstanceError) as error:
        observe(2, bad)
    assert "\n" not in str(error.value) and "metrics" in str(error.value)


def test_the_root_remembers_what_spec_autoscale_asked():
    doc = minicluster_doc("grow", size=2, minSize=2, maxSize=4, autoscale={"scaleDownDelaySeconds": 45},
                          containers=[{"image": "x", "command": "y"}])  # fmt: skip
    root = prepare(MiniCluster.from_dict(doc))[-1]
    assert Root(Target.JOB, root).autoscale == (2, 45.0)
    del doc["spec"]["autoscale"]
    assert Root(Target.JOB, prepare(MiniCluster.from_dict(doc))[-1]).autoscale is None
    root["metadata"]["annotations"][AUTOSCALE] = "{not json"
    assert Root(Target.JOB, root).autoscale is None


def test_only_jobs_waiting_for_resources_ask_for_nodes():
    """metrics.py's "sched": a job waiting on a dependency is no demand."""
    waiting = {"nodes": 2, "cores": 0, "max_nodes": 2, "max_cores": 0}
    seen_ = observe(1, {**metrics(pending=8, largest=4), "sched": waiting})
    assert (seen_.pending_nodes, seen_.pending_max_nodes) == (2, 2)
    assert observe(1, metrics(pending=8, largest=4)).pending_nodes == 8  # an older metrics.py


def test_nodes_in_use_come_from_the_same_snapshot_as_the_asks():
    """A job scheduled between two reads is pending in one and allocated in
    the other: with metrics.py's sched.allocated (job-list's one answer) it
    is counted once, so it grows nothing."""
    asks = {"nodes": 1, "cores": 1, "max_nodes": 1, "max_cores": 1, "allocated": ""}
    seen_ = observe(1, {**metrics(allocated="0"), "sched": asks})
    assert seen_.allocated == frozenset()
    assert decide(POLICY, seen_, State(), 0)[0].size == 1
