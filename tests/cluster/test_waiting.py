"""The waits on rank 0's pod when a disruption ends it: the Job replaces a
disrupted pod (its podFailurePolicy ignores disruptions), so that pod's exit
code ends nothing, and a pod that is gone has no exit code to give."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from fluxhop.errors import NotFound
from fluxhop.spec.flags import minicluster_from_flags


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


def test_a_lead_deleted_while_it_is_watched_has_no_exit_code(fake, ops, kube, running):
    root, name = running
    with ThreadPoolExecutor(1) as pool:
        ended = pool.submit(ops.wait_lead_end, root, name, timeout=60)
        kube.delete("Pod", name)
        assert ended.result(timeout=60) is None


def test_a_lead_that_exits_gives_its_code(fake, ops, running):
    root, name = running
    fake.runner = lambda pod, index: ([], 0)
    assert ops.wait_lead_end(root, name, timeout=60) == 0


def test_a_lead_gone_with_its_finished_job_gives_the_jobs_outcome(fake, ops, kube, running):
    root, name = running
    with fake.changed:
        job = fake.store[("Job", "default", "demo")]
        fake._finish("default", job, "Failed", "BackoffLimitExceeded")  # the Job controller
    kube.delete("Pod", name)
    assert ops.wait_lead_end(root, name, timeout=60) == 1


def test_a_minicluster_deleted_under_a_wait_is_one_line(fake, ops, kube, running):
    root, name = running
    kube.delete("Job", "demo")
    with pytest.raises(NotFound, match=r"^MiniCluster demo was deleted before rank 0 ended$"):
        ops.wait_lead_end(root, name, timeout=60)
