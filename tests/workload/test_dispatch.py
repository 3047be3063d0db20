"""A dispatched MiniCluster as the manager sees it (workload/dispatch.py):
where it is, what it waits for, and when its end is known."""

from __future__ import annotations

from fluxhop.workload.dispatch import dispatch_of
from tests.cluster.multikueue import worker_status


def resource(status=None):
    return {"metadata": {"name": "mk"}, "spec": {"size": 2}, "status": status or {}}


def workload(*conditions, cluster=None, checks=()):
    status = {"conditions": [{"type": t, "status": s, "message": m} for t, s, m in conditions],
              "admissionChecks": list(checks)}  # fmt: skip
    if cluster:
        status["clusterName"] = cluster
    return {"metadata": {"name": "w", "creationTimestamp": "2026-12-05T00:00:00Z"},
            "status": status}  # fmt: skip


ADMITTED = (("QuotaReserved", "True", ""), ("Admitted", "True", ""))


def test_before_its_workload_it_waits_for_admission():
    state = dispatch_of(resource(), [], "lq")
    assert (state.cluster, state.summary(), state.ended) == (
        None, "waiting for admission by queue lq", False)  # fmt: skip


def test_a_pending_admission_check_says_its_message():
    check = {"name": "mk", "state": "Pending", "message": 'The workload got reservation on "w1"'}
    state = dispatch_of(resource(), [workload(("QuotaReserved", "True", ""), checks=[check])], "lq")
    assert state.summary() == (
        "waiting for admission by queue lq: quota reserved, waiting for admission checks "
        '(mk Pending: The workload got reservation on "w1")'
    )


def test_admitted_it_names_the_worker_and_its_brokers():
    state = dispatch_of(resource(worker_status(up=1)), [workload(*ADMITTED, cluster="w1")], "lq")
    assert (state.cluster, state.up, state.summary()) == (
        "w1", False, "dispatched to worker cluster w1: 1/2 brokers up")  # fmt: skip
    state = dispatch_of(resource(worker_status(up=2)), [workload(*ADMITTED, cluster="w1")], "lq")
    assert (state.up, state.summary()) == (True, "running on worker cluster w1: 2/2 brokers up")


def test_evicted_no_worker_has_it():
    evicted = workload(*ADMITTED, ("Evicted", "True", "Preempted on w1"), cluster="w1")
    state = dispatch_of(resource(worker_status(up=2)), [evicted], "lq")
    assert state.cluster is None
    assert state.summary() == "waiting for admission by queue lq: Preempted on w1"


def test_the_end_is_known_with_the_output_or_the_workload_finished():
    over = resource(worker_status(up=0, code=3, output="x\n"))
    assert not dispatch_of(over, [], "lq").ended  # which worker: not known yet
    ended = dispatch_of(over, [workload(*ADMITTED, cluster="w1")], "lq")
    assert (ended.ended, ended.exit_code, ended.output, ended.failure) == (
        True, 3, "x\n", "rank 0 exited with code 3")  # fmt: skip
    quiet = resource(worker_status(up=0, code=0))
    assert not dispatch_of(quiet, [workload(*ADMITTED, cluster="w1")], "lq").ended
    finished = workload(*ADMITTED, ("Finished", "True", ""), cluster="w1")
    assert dispatch_of(quiet, [finished], "lq").ended


def test_a_failure_without_a_code_is_its_last_status_and_exits_1():
    """Failed before rank 0 ran (no exit code): no output will come."""
    failed = resource({"conditions": [{"type": "Failed", "status": "True", "message": "gone"}]})
    state = dispatch_of(failed, [workload(*ADMITTED, cluster="w1")], "lq")
    assert (state.ended, state.exit_code, state.failure, state.up) == (True, 1, "gone", False)


def test_failed_with_rank_0s_code_0_still_exits_non_zero():
    status = worker_status(up=0, code=0, output="x")
    status["conditions"] = [{"type": "Failed", "status": "True", "message": "rank 1 failed"}]
    state = dispatch_of(resource(status), [workload(*ADMITTED, cluster="w1")], "lq")
    assert (state.exit_code, state.failure) == (1, "rank 1 failed")


def test_kueue_ending_it_says_why():
    finished = workload(("Finished", "True", "cannot start: x"), cluster="w1")
    finished["status"]["conditions"][0]["reason"] = "FailedToStart"
    state = dispatch_of(resource(), [finished], "lq")
    assert (state.ended, state.exit_code, state.failure) == (
        True, 1, "its Workload finished: cannot start: x")  # fmt: skip
    off = workload(("Evicted", "True", "The workload is deactivated"))
    off["spec"] = {"active": False}
    state = dispatch_of(resource(), [off], "lq")
    assert (state.ended, state.failure) == (
        True, "Kueue deactivated its Workload: The workload is deactivated")  # fmt: skip
