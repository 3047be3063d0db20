"""A pod's problems only a node finds, in one line with its rank and pod,
read from container states as the kubelet writes them."""

from __future__ import annotations

from typing import Any

import pytest

from fluxhop.workload.pod_problems import pod_problem


def pod(*statuses: dict[str, Any], init: list[dict[str, Any]] | None = None,
        memory: str | None = None) -> dict[str, Any]:  # fmt: skip
    resources = {"limits": {"memory": memory}} if memory else {}
    return {
        "metadata": {"name": "mc-0", "annotations": {"batch.kubernetes.io/job-completion-index": "0"}},
        "spec": {"containers": [{"name": "mc", "resources": resources}]},
        "status": {"initContainerStatuses": init or [], "containerStatuses": list(statuses)},
    }  # fmt: skip


def waiting(reason: str, message: str, name: str = "mc") -> dict[str, Any]:
    return {"name": name, "state": {"waiting": {"reason": reason, "message": message}}}


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("ErrImagePull", 'failed to pull and unpack image "docker.io/library/nope:1": not found'),
        ("ImagePullBackOff", 'Back-off pulling image "nope:1"'),
        ("CreateContainerConfigError", 'secret "missing" not found'),
        ("CreateContainerError", "container has runAsNonRoot and image will run as root"),
        ("InvalidImageName", 'Failed to apply default image tag "Bad Name"'),
    ],
)
def test_a_container_stuck_says_the_nodes_words(reason, message):
    problem = pod_problem(pod(waiting(reason, message)))
    assert problem is not None
    assert problem.line() == f"rank 0 (pod mc-0), container mc: {reason}: {message}"


def test_a_view_image_without_the_view_names_the_field():
    """containerd's words when the mounted view image lacks a subPath
    (flux.container.volume image), then what to change."""
    said = ('failed to mount image volume: ImageVolumeMountFailed: failed to ensure image '
            'subpath "opt/views/view" in "/var/lib/containerd/image-volumes/x/y": openat '
            "opt/views/view: no such file or directory")  # fmt: skip
    problem = pod_problem(pod(waiting("CreateContainerError", said)))
    assert problem is not None and "\n" not in problem.line()
    assert problem.line().startswith(
        f"rank 0 (pod mc-0), container mc: CreateContainerError: {said}"
    )
    assert problem.line().endswith("; set flux.container.image to a Flux view image (a Spack view at "
                                   "/opt/views/view, its tree at /opt/software)")  # fmt: skip


def test_an_init_container_is_read_first():
    found = pod_problem(
        pod(waiting("PodInitializing", ""), init=[waiting("ErrImagePull", "not found", "view")])
    )
    assert found is not None and found.container == "view" and found.reason == "ErrImagePull"


def test_an_oom_kill_names_the_limit_now_or_as_the_last_state():
    ended = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    for status in ({"name": "mc", "state": ended}, {"name": "mc", "state": {}, "lastState": ended}):
        problem = pod_problem(pod(status, memory="64Mi"))
        assert problem is not None
        assert problem.line() == (
            "rank 0 (pod mc-0), container mc: OOMKilled: exit 137, killed for using more "
            "memory than its limit (64Mi)"
        )


@pytest.mark.parametrize(
    "status",
    [
        waiting("ContainerCreating", ""),
        waiting("PodInitializing", ""),
        waiting("CrashLoopBackOff", "back-off 10s restarting failed container"),
        {"name": "mc", "state": {"running": {}}},
        {"name": "mc", "state": {"terminated": {"reason": "Error", "exitCode": 3}}},
    ],
)
def test_what_a_wait_outlasts_or_the_job_reports_is_no_problem(status):
    assert pod_problem(pod(status)) is None


def test_a_pod_without_a_rank_is_named_alone():
    bare = pod(waiting("ErrImagePull", "not found"))
    bare["metadata"]["annotations"] = {}
    problem = pod_problem(bare)
    assert problem is not None and problem.line().startswith("pod mc-0, container mc:")
