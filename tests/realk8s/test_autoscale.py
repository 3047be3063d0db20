"""Autoscaling on the real cluster with real Flux (issue #24): a MiniCluster
of size 1 and maxSize 4 grows to 4 for a job that needs 4 nodes, which then
runs and completes; idle, it is drained and shrunk back to 1, the drained
ranks leaving cleanly; a job running on rank 3 when the delay has passed
keeps running until it ends, and only then the shrink happens. Under
Fluxion (easy, fluxhop's choice for a MiniCluster that can grow) and under
sched-simple: the job waits for the growth under both.

``fluxhop autoscale --once`` makes one decision per call, so the test steps
the policy itself. The MiniCluster is made from a file whose spec.autoscale
sets the scale-down delay to 0, and ``fluxhop autoscale`` takes it from
there (the delay's timing is the pure policy's, tested in
tests/workload/test_autoscale.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.documents import minicluster_doc
from tests.realflux.schedulers import Scheduler
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.tools import InNamespace, eventually, scratch_namespace

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME = "grow"


class Grow(InNamespace):
    scheduler: Scheduler

    def step(self) -> str:
        return self.checked("autoscale", NAME, "--once").strip()

    def flux(self, *args: str) -> str:
        return self.checked("proxy", NAME, "flux", *args)

    def pods(self) -> int:
        return len(self.admin.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"])

    def state(self, jobid: str) -> str:
        return self.flux("jobs", "-no", "{state}", jobid).strip()


@pytest.fixture(scope="module")
def grow(cluster: LocalCluster, scheduler: Scheduler) -> Iterator[Grow]:
    with scratch_namespace(cluster) as (admin, namespace):
        grow = Grow(cluster, admin, namespace)
        grow.scheduler = scheduler
        yield grow


def test_it_grows_for_a_job_that_needs_four_nodes(grow: Grow, tmp_path: Path):
    spec = minicluster_doc(NAME, size=1, maxSize=4, interactive=True,
                           autoscale={"scaleDownDelaySeconds": 0},
                           flux=grow.scheduler.flux(container={"disable": True}),
                           containers=[{"image": "host"}])  # fmt: skip
    spec = placed_minicluster(grow.cluster, spec)
    (tmp_path / "grow.yaml").write_text(yaml.safe_dump(spec))
    grow.checked("create", "-f", str(tmp_path / "grow.yaml"))
    eventually("rank 0 online", lambda: grow.online(NAME) == 1, timeout=120)
    assert grow.scheduler.loaded(grow.flux("module", "list"))
    jobid = grow.checked("submit", NAME, "-N", "4", "--", "hostname").strip()
    eventually("the job pending", lambda: grow.state(jobid) == "SCHED")
    assert "size 1 -> 4" in grow.step()
    eventually("the job ran", lambda: grow.state(jobid) == "INACTIVE", timeout=240)
    result = grow.flux("jobs", "-no", "{result} {nnodes}", jobid).split()
    assert result == ["COMPLETED", "4"]


def test_idle_it_is_drained_and_shrunk(grow: Grow):
    assert "draining ranks 1-3" in grow.step()
    assert "size 4 -> 1" in grow.step()
    eventually("the drained ranks' pods gone", lambda: grow.pods() == 1, timeout=120)
    eventually("one broker online", lambda: grow.online(NAME) == 1)
    lost = grow.flux("overlay", "status", "--no-pretty", "--color=never")
    assert "lost" not in lost, lost  # they left cleanly: offline, not lost


def test_a_job_on_rank_three_finishes_before_the_shrink(grow: Grow):
    first = grow.checked("submit", NAME, "-N", "4", "--", "true").strip()
    eventually("the job pending", lambda: grow.state(first) == "SCHED")
    assert "size 1 -> 4" in grow.step()  # it also undrains ranks 1-3
    eventually("grown and run", lambda: grow.state(first) == "INACTIVE", timeout=240)
    mark = "/tmp/fluxhop-autoscale-go"  # rank 3's own /tmp: the job waits for the test
    job = grow.checked("submit", NAME, "-N", "1", "--flux-args", "--requires=rank:3", "--", "sh", "-c",
                       f"until [ -e {mark} ]; do sleep 0.2; done").strip()  # fmt: skip
    eventually("the job running on rank 3", lambda: grow.state(job) == "RUN")
    assert "waiting for the job(s) on ranks 3" in grow.step()
    assert "waiting for the job(s) on ranks 3" in grow.step()
    assert grow.state(job) == "RUN" and grow.pods() == 4  # nothing was killed
    grow.flux("exec", "-r", "3", "touch", mark)
    eventually("its job ended by itself", lambda: grow.state(job) == "INACTIVE")
    assert grow.flux("jobs", "-no", "{result}", job).strip() == "COMPLETED"
    assert "size 4 -> 1" in grow.step()
    eventually("back to one pod", lambda: grow.pods() == 1, timeout=120)
