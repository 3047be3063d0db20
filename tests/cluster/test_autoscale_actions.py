"""``fluxhop autoscale``'s decision step (cluster/autoscale_actions.Autoscaler)
against the fake API server, rank 0 reached through lightkube's exec
(tests/cluster/fakeexec.py): what it runs in Flux, in which order, when it
resizes, how few requests a decision takes, and that the idle time is kept
on the MiniCluster so that ``--once`` from a timer waits out the delay.
With real Flux and a real API server: tests/realk8s/test_autoscale.py."""

from __future__ import annotations

import json

import pytest

from fluxhop.cluster.autoscale_actions import Autoscaler, state_of, state_record
from fluxhop.errors import InstanceError
from fluxhop.spec import MiniCluster
from fluxhop.workload.autoscale import DRAIN_REASON, Policy, State
from fluxhop.workload.marks import AUTOSCALE_STATE
from tests.cluster.rank0 import metrics
from tests.cluster.test_inside import interactive


@pytest.fixture
def made(fake, ops, rank0, tmp_path):
    """``fluxhop create`` of an interactive MiniCluster (maxSize 4), at ``size``."""

    def make(size: int):
        doc = interactive("work", str(tmp_path / "flux")).to_dict()
        doc["spec"].update(size=size, maxSize=4)
        ops.wait_ready(ops.create(MiniCluster.from_dict(doc)), timeout=60)
        return ops.require("work")

    return make


def step(ops, now: float, delay: float = 0):
    return Autoscaler(ops, "work", Policy(1, 4, delay), clock=lambda: now).step()


def test_growth_scales_then_undrains_while_the_pods_start(fake, ops, rank0, made):
    made(1)
    rank0.now = metrics(pending=4, drained="1-3")
    patched = []
    fake.exec_runner = lambda pod, container, argv: (
        patched.append(fake.get("Job", "work")["spec"]["parallelism"]),
        rank0.execute(pod, container, argv),
    )[1]
    assert step(ops, 0)[1].size == 4
    assert rank0.ran[1] == ["resource", "undrain", "1-3"]  # after the metrics
    assert patched == [1, 4]  # the metrics read at size 1; the undrain after the resize


def test_a_shrink_drains_without_overwriting_an_admins_reason(fake, ops, rank0, made):
    made(4)
    rank0.now = metrics(allocated="3")
    assert step(ops, 0)[1].size == 4
    assert rank0.ran[1] == ["resource", "drain", "--update", "1-3", DRAIN_REASON]
    assert fake.get("Job", "work")["spec"]["parallelism"] == 4


def test_drained_and_idle_it_scales_down(fake, ops, rank0, made):
    made(4)
    rank0.now = metrics(drained="1-3")
    assert step(ops, 0)[1].size == 1
    assert fake.get("Job", "work")["spec"]["parallelism"] == 1


def test_a_decision_is_three_requests_and_one_exec(fake, ops, rank0, made):
    made(2)
    rank0.now = metrics(allocated="0-1")
    before = len(fake.requests)
    step(ops, 0)
    sent = [str(r) for r in fake.requests[before:]]
    assert sent[:2] == ["GET jobs/work", "GET pods"] and len(sent) == 3
    assert fake.requests[-1].path.endswith("/exec")  # rank 0's pod, its metrics.py


def test_once_from_a_timer_waits_out_the_delay(fake, ops, rank0, made):
    """Each step is a new Autoscaler, as each `fluxhop autoscale --once` is."""
    made(4)
    rank0.now = metrics(allocated="0")
    assert step(ops, 1000, delay=60)[1].wait == 60
    recorded = json.loads(fake.get("Job", "work")["metadata"]["annotations"][AUTOSCALE_STATE])
    assert recorded == {"idleSince": "1970-01-01T00:16:40Z", "shrinkTo": 1}
    assert step(ops, 1030, delay=60)[1].wait == 30  # remembered: not restarted
    assert sorted(step(ops, 1060, delay=60)[1].drain) == [1, 2, 3]
    rank0.now = metrics(allocated="0", drained="1-3")
    assert step(ops, 1061, delay=60)[1].size == 1
    annotations = fake.get("Job", "work")["metadata"]["annotations"]
    assert AUTOSCALE_STATE not in annotations  # done: nothing left to remember


def test_rank_0_not_running_is_one_line(fake, ops, rank0, made):
    made(1)
    # rank 0's pod terminating: a state the fake's controllers leave as it is
    # (a Pending pod they would start again, racing this test on a loaded machine)
    with fake.lock:
        for pod in fake.objects(kinds=("Pod",)):
            stored = fake.store[("Pod", "default", pod["metadata"]["name"])]
            stored["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    with pytest.raises(InstanceError, match="rank 0 is not running"):
        step(ops, 0)


def test_the_idle_time_reads_back_as_written():
    state = State(1796188276.0, 2)
    assert state_of(state_record(state)) == state
    assert state_record(State()) == {} and state_of({}) == State()
    assert state_of({"idleSince": "yesterday", "shrinkTo": 1}) == State()
