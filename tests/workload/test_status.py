"""A MiniCluster's state from its objects alone (workload.status_of is pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fluxhop.render.targets import Target
from fluxhop.workload import Root, status_of

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


def job(condition: str | None = None) -> dict:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {"status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("workload", "pods", "state", "code"),
    [
        (job(), [], "Pending", None),
        (job(), [pod(0, "Running"), pod(1, "Pending")], "Pending", None),
        (job(), [pod(0, "Running"), pod(1, "Running")], "Running", None),
        (job(), [pod(0, "Succeeded", 0), pod(1, "Running")], "Succeeded", 0),
        (job(), [pod(0, "Failed", 3), pod(1, "Running")], "Failed", 3),
        (job("Failed"), [], "Failed", None),
        (job("Complete"), [], "Succeeded", None),
        (job("Suspended"), [], "Suspended", None),
        (job(), [evicted(0), pod(0, "Pending"), pod(1, "Running")], "Pending", None),
        (job(), [evicted(0), pod(0, "Succeeded", 0), pod(1, "Running")], "Succeeded", 0),
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
