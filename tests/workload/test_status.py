"""A MiniCluster's state from its objects alone (workload.status_of is pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fluxhop.render.targets import Target
from fluxhop.workload import Root, status_of
from fluxhop.workload.status import Progress, disruption

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def root(size: int = 2, target: str = "job") -> Root:
    created = (NOW - timedelta(seconds=90)).isoformat().replace("+00:00", "Z")
    spec = {"parallelism": size} if target == "job" else {"size": size}
    return Root(target, {"metadata": {"name": "demo", "creationTimestamp": created}, "spec": spec})


def pod(index: int, phase: str, code: int | None = None) -> dict:
    status: dict = {"phase": phase}
    if code is not None:
        status["containerStatuses"] = [
            {"name": "demo", "state": {"terminated": {"exitCode": code}}}
        ]
    labels = {"batch.kubernetes.io/job-completion-index": str(index)}
    return {"metadata": {"labels": labels}, "status": status}


def evicted(index: int) -> dict:
    """A pod a drain or a preemption ended: the Job replaces it."""
    gone = pod(index, "Failed", 143)
    gone["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    return gone


def lost(index: int) -> dict:
    """A pod the taint manager evicts from a node that stopped answering: it
    stays Terminating (Running, deleted) while the node's kubelet is gone."""
    stuck = pod(index, "Running")
    stuck["metadata"]["deletionTimestamp"] = "2026-12-01T11:59:00Z"
    stuck["spec"] = {"nodeName": "node-c"}
    stuck["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                      "reason": "DeletionByTaintManager"}]  # fmt: skip
    return stuck


def job(condition: str | None = None) -> dict:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {"status": {"conditions": conditions}}


def kept(kind: str = "job") -> dict:
    """A workload of spec.leadState's: its podFailurePolicy ignores exit 143."""
    rule = {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [143]}}
    spec = {"podFailurePolicy": {"rules": [rule]}}
    if kind == "jobset":
        spec = {"replicatedJobs": [{"name": "node", "template": {"spec": spec}}]}
    return {**job(), "spec": spec}


@pytest.mark.parametrize(
    ("workload", "pods", "state", "code"),
    [
        (job(), [], "Pending", None),
        # rank 0's pod deleted: without leadState the Job fails; with it, it is made again
        (job(), [pod(0, "Failed", 143), pod(1, "Running")], "Failed", 143),
        (kept(), [pod(0, "Failed", 143), pod(0, "Pending"), pod(1, "Running")], "Pending", None),
        (
            kept("jobset"),
            [pod(0, "Failed", 143), pod(0, "Running"), pod(1, "Running")],
            "Running",
            None,
        ),
        (kept(), [pod(0, "Failed", 3), pod(1, "Running")], "Failed", 3),
        (job(), [pod(0, "Running"), pod(1, "Pending")], "Pending", None),
        (job(), [pod(0, "Running"), pod(1, "Running")], "Running", None),
        (job(), [pod(0, "Succeeded", 0), pod(1, "Running")], "Succeeded", 0),
        (job(), [pod(0, "Failed", 3), pod(1, "Running")], "Failed", 3),
        (job("Failed"), [], "Failed", None),
        (job("Complete"), [], "Succeeded", None),
        (job("Suspended"), [], "Suspended", None),
        (job(), [evicted(0), pod(0, "Pending"), pod(1, "Running")], "Pending", None),
        (job(), [evicted(0), pod(0, "Succeeded", 0), pod(1, "Running")], "Succeeded", 0),
        (job(), [lost(0), lost(1)], "Disrupted", None),
        (job(), [lost(0), pod(1, "Running")], "Disrupted", None),
    ],
)
def test_state_follows_conditions_and_rank_0(workload, pods, state, code):
    status = status_of(root(), workload, pods, NOW)
    assert (status.state, status.exit_code) == (state, code)
    assert status.age == 90 and status.target is Target.JOB


def test_phases_are_counted_and_the_target_is_plain_text_in_dicts():
    status = status_of(
        root(3), job(), [pod(0, "Running"), pod(1, "Running"), pod(2, "Pending")], NOW
    )
    assert status.pods == {"Running": 2, "Pending": 1}
    assert status.to_dict()["target"] == "job" and type(status.to_dict()["target"]) is str


def test_a_root_refuses_an_unknown_target():
    with pytest.raises(
        ValueError, match="target 'deployment' is not one of job, jobset, minicluster"
    ):
        root(target="deployment")


def test_a_pod_being_deleted_is_terminating_not_running():
    status = status_of(root(), job(), [lost(0), pod(1, "Running")], NOW)
    assert status.pods == {"Terminating": 1, "Running": 1}
    progress = Progress(2, {"a": lost(0), "b": pod(1, "Running")})
    assert progress.summary() == "1/2 pods scheduled, 1 running, 1 stopping"  # pod() has no node


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("DeletionByTaintManager", "its node node-c stopped answering"),
        ("EvictionByEvictionAPI", "evicted (a node drain, or kubectl evict)"),
        ("PreemptionByScheduler", "preempted it for a pod of higher priority"),
        ("DeletionByPodGC", "its node is gone"),
        ("TerminationByKubelet", "node pressure or shutdown"),
    ],
)
def test_why_a_pod_was_disrupted(reason, says):
    gone = lost(0)
    gone["status"]["conditions"][0]["reason"] = reason
    assert says in disruption(gone)
    if reason == "DeletionByTaintManager":
        assert "kubectl delete node node-c" in disruption(gone)
