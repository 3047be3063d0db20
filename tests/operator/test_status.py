"""A MiniCluster resource's status says what a node says keeps its pods
from running (the Ready condition) or killed rank 0 (the Failed one)."""

from __future__ import annotations

from typing import Any

from fluxhop.operator.status import resource_status

NOW = "2026-12-06T00:00:00Z"
INDEX = "batch.kubernetes.io/job-completion-index"


def resource() -> dict[str, Any]:
    return {"metadata": {"name": "mc", "generation": 1}, "spec": {"size": 2}}


def job(**conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "mc", "labels": {}},
        "spec": {"parallelism": 2, "completions": 2,
                 "template": {"spec": {"containers": [{"name": "mc"}]}}},
        "status": {"conditions": [{"type": k, "status": v} for k, v in conditions.items()]},
    }  # fmt: skip


def pod(index: int, state: dict[str, Any], memory: str | None = None) -> dict[str, Any]:
    resources = {"limits": {"memory": memory}} if memory else {}
    return {
        "metadata": {"name": f"mc-{index}", "annotations": {INDEX: str(index)}},
        "spec": {"containers": [{"name": "mc", "resources": resources}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "mc", "state": state}]},
    }


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_ready_names_the_stuck_pod_in_the_nodes_words():
    stuck = {"waiting": {"reason": "ErrImagePull", "message": "pull: not found"}}
    pods = [pod(0, stuck), pod(1, {"waiting": {"reason": "ContainerCreating"}})]
    ready = condition(resource_status(resource(), job(), pods, max_size=2, now=NOW), "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ErrImagePull"
    assert ready["message"] == (
        "0/2 brokers up; rank 0 (pod mc-0), container mc: ErrImagePull: pull: not found"
    )


def test_pods_only_starting_say_so():
    pods = [pod(i, {"waiting": {"reason": "ContainerCreating"}}) for i in (0, 1)]
    ready = condition(resource_status(resource(), job(), pods, max_size=2, now=NOW), "Ready")
    assert (ready["reason"], ready["message"]) == ("BrokersStarting", "0/2 brokers up")


def test_failed_says_rank_0_was_killed_for_its_memory():
    killed = pod(0, {"terminated": {"reason": "OOMKilled", "exitCode": 137}}, memory="1Gi")
    killed["status"]["phase"] = "Failed"
    status = resource_status(resource(), job(Failed="True"), [killed], max_size=2, now=NOW)
    failed = condition(status, "Failed")
    assert failed["reason"] == "OOMKilled"
    assert failed["message"] == (
        "rank 0 (pod mc-0), container mc: OOMKilled: exit 137, killed for using more memory "
        "than its limit (1Gi)"
    )
