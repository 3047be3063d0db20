"""The waits on rank 0's pod when a disruption ends it: the Job replaces a
disrupted pod (its podFailurePolicy ignores disruptions), so that pod's exit
code ends nothing. A plain DELETE is no disruption: as on a real cluster
(tests/realk8s/test_fake_parity.py), the container exits 143 on SIGTERM and
the Job fails."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import fluxhop
from fluxhop.errors import NotFound
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.workload.marks import COMPLETION_INDEX
from fluxhop.workload.status import Progress
from tests.cluster.fakeapi import BACKOFF
from tests.cluster.fixtures import eventually


@pytest.fixture
def running(fake, ops):
    """A MiniCluster whose rank 0 runs until the test ends it; its root and lead pod."""
    fake.runner = lambda pod, index: None if index == 0 else ([], 0)
    root = ops.create(minicluster_from_flags(["app"], image="ubuntu", nodes=2, name="demo"))
    lead = ops.wait_lead_started(root, timeout=60)
    return root, lead["metadata"]["name"]


def test_a_disrupted_lead_ends_nothing_and_its_replacement_is_found(fake, ops, running):
    root, name = running
    fake.evict(name)
    assert ops.wait_lead_end(root, name, timeout=60) is None
    replacement = ops.wait_lead_started(root, timeout=60, other_than=name)
    assert replacement["metadata"]["name"] != name
    fake.runner = lambda pod, index: ([], 5) if index == 0 else ([], 0)
    assert ops.wait_lead_end(root, replacement["metadata"]["name"], timeout=60) == 5
    assert ops.wait_exit(root, timeout=60) == 5  # not the evicted container's 143


def conditions(fake) -> list[tuple[str, str]]:
    job = fake.get("Job", "demo") or {}
    return [(c["type"], c["reason"]) for c in job.get("status", {}).get("conditions", [])]


def test_a_lead_deleted_while_it_is_watched_ends_with_sigterm_and_fails_the_job(
    fake, ops, kube, running
):
    """No DisruptionTarget for a plain DELETE: the container ends by SIGTERM
    (143, which the watch sees before the pod goes), the Job controller counts
    the failure, and with backoffLimit 0 the Job fails; rank 0 is not replaced."""
    root, name = running
    watches = len(fake.seen("WATCH"))
    with ThreadPoolExecutor(1) as pool:
        ended = pool.submit(ops.wait_lead_end, root, name, timeout=60)
        eventually(lambda: len(fake.seen("WATCH")) > watches)  # the wait watches the pod
        kube.delete("Pod", name)
        assert ended.result(timeout=60) == 143
    eventually(lambda: ("Failed", "BackoffLimitExceeded") in conditions(fake))
    assert conditions(fake) == [
        ("FailureTarget", "BackoffLimitExceeded"),
        ("Failed", "BackoffLimitExceeded"),
    ]
    assert fake.objects(kinds=("Pod",)) == []  # not replaced; the worker terminated too


def test_a_lead_that_exits_gives_its_code(fake, ops, running):
    root, name = running
    fake.runner = lambda pod, index: ([], 0)
    assert ops.wait_lead_end(root, name, timeout=60) == 0


def test_a_lead_gone_with_its_finished_job_gives_the_jobs_outcome(fake, ops, kube, running):
    """A worker's pod deleted fails the Job; the Job controller terminates
    rank 0 and removes it: read once the Job has failed, it is gone."""
    root, name = running
    (worker,) = [p for p in fake.objects(kinds=("Pod",)) if p["metadata"]["name"] != name]
    kube.delete("Pod", worker["metadata"]["name"])
    eventually(lambda: ("Failed", "BackoffLimitExceeded") in conditions(fake))
    assert fake.get("Pod", name) is None
    assert ops.wait_lead_end(root, name, timeout=60) == 1


def test_a_minicluster_deleted_under_a_wait_is_one_line(fake, ops, kube, running):
    root, name = running
    kube.delete("Job", "demo")
    with pytest.raises(NotFound, match=r"^MiniCluster demo was deleted before rank 0 ended$"):
        ops.wait_lead_end(root, name, timeout=60)


def test_a_lead_gone_while_its_job_is_failing_gives_the_failure(fake, ops, running):
    root, name = running
    with fake.changed:  # the controllers wait: FailureTarget, rank 0 gone, not yet Failed
        fake._finish("default", fake.store[("Job", "default", "demo")], "FailureTarget", BACKOFF)
        assert fake.get("Pod", name) is None
        assert ops.wait_lead_end(root, name, timeout=5) == 1


def test_wait_reports_a_job_that_a_failed_worker_ended(fake, kubeconfig):
    fake.runner = lambda pod, index: None  # every rank runs until stopped
    with fluxhop.Client(kubeconfig=str(kubeconfig), transport=fake.transport()) as client:
        name = client.create(minicluster_from_flags(["app"], image="ubuntu", nodes=2, name="demo"))
        watches = len(fake.seen("WATCH"))
        with ThreadPoolExecutor(1) as pool:
            waited = pool.submit(client.wait, name, 60)
            # wait_lead_started's watch, then wait_lead_end's on the running rank 0
            eventually(lambda: len(fake.seen("WATCH")) >= watches + 2)
            (worker,) = [p for p in fake.objects(kinds=("Pod",)) if p["metadata"]["labels"][
                "batch.kubernetes.io/job-completion-index"] == "1"]  # fmt: skip
            client.ops.kube.delete("Pod", worker["metadata"]["name"])
            status = waited.result(timeout=60)
            # no pod failed on its own (the worker was deleted): rank 0's 143 stands
            assert (status.state, status.exit_code) == ("Failed", 143)


def pod(index: int, phase: str, ready: bool) -> dict:
    return {
        "metadata": {"name": f"demo-{index}", "labels": {COMPLETION_INDEX: str(index)}},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


@pytest.mark.parametrize(
    ("pods", "up"),
    [
        ([pod(0, "Running", True), pod(1, "Pending", False)], False),  # no probe: Ready at once
        ([pod(0, "Running", False), pod(1, "Running", True)], False),  # quorum not yet
        ([pod(0, "Running", True), pod(1, "Running", True)], True),
        ([pod(0, "Running", False), pod(1, "Failed", False)], True),  # ended: said by the caller
    ],
    ids=["a-pod-pending", "rank-0-not-ready", "up", "a-worker-failed"],
)
def test_the_instance_is_up_once_rank_0_is_ready_and_every_pod_runs(
    ops, running, monkeypatch, pods, up
):
    """What wait_instance_up waits for, whether or not the pods have fluxhop's
    readinessProbe (the Flux Operator's have none: Ready as they run)."""
    root, _ = running
    asked = {}
    monkeypatch.setattr(ops, "wait", lambda _root, until, **_: asked.setdefault("until", until))
    ops.wait_instance_up(root, timeout=1)
    assert asked["until"](Progress(2, {p["metadata"]["name"]: p for p in pods})) is up


def test_pods_gone_waits_for_the_pods_the_garbage_collector_deletes(fake, ops, running):
    """They outlive their root a while (their grace period, on a real
    cluster): the wait ends once the last is gone."""
    root, _ = running
    fake.collected_pods_linger = 10**9  # until released below
    ops.delete_root(root)
    assert fake.objects(kinds=("Pod",))  # still there, stopping
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(ops.wait_pods_gone, root, timeout=60)
        assert not waiting.done()
        release(fake)
        waiting.result(timeout=60)
    assert fake.objects(kinds=("Pod",)) == []


def release(fake) -> None:
    """The lingering pods go on the controllers' next step."""
    with fake.changed:
        fake.lingering = dict.fromkeys(fake.lingering, 1)


def test_pods_gone_is_not_cut_short_by_a_pod_that_could_never_start(fake, ops, running):
    """A pod whose image cannot be pulled is stuck for a wait that it run,
    not for one that it go: the wait goes on until it is gone."""
    root, lead = running
    fake.collected_pods_linger = 10**9  # until released below
    ops.delete_root(root)
    listed = len(fake.requests)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(ops.wait_pods_gone, root, timeout=60)
        eventually(lambda: any(r.verb == "GET" and r.resource.endswith("pods")
                               for r in fake.requests[listed:]))  # fmt: skip
        with fake.changed:  # after the wait listed the pods: an event it sees
            pod = fake.store[("Pod", "default", lead)]
            pod["status"]["containerStatuses"][0]["state"] = {
                "waiting": {"reason": "ImagePullBackOff", "message": "no such image"}
            }
            fake._bump("MODIFIED", "Pod", "default", pod)
        release(fake)
        waiting.result(timeout=60)
    assert fake.objects(kinds=("Pod",)) == []


def test_a_minicluster_deleted_while_it_comes_up_ends_the_wait_at_once(fake, ops, kube):
    """Its owner deleted it (a DWS Workflow deleted during PreRun takes its
    MiniCluster along): once its last pod is gone, the wait for the
    instance ends in one line, not at its timeout."""
    fake.schedulable = False  # its pods stay Pending: the instance never comes up
    root = ops.create(minicluster_from_flags(["app"], image="ubuntu", nodes=2, name="demo"))
    watches = len(fake.seen("WATCH"))
    with ThreadPoolExecutor(1) as pool:
        waited = pool.submit(ops.wait_instance_up, root, timeout=120)
        eventually(lambda: len(fake.seen("WATCH")) > watches)  # it watches the pods
        kube.delete("Job", "demo")
        with pytest.raises(NotFound, match=r"^MiniCluster demo was deleted, and its pods with it$"):
            waited.result(timeout=60)
