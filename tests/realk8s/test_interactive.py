"""An interactive MiniCluster on the real cluster, with real Flux: ``create``,
then the verbs that work inside it (``submit --cc``, ``jobs``, ``status``,
``attach``, ``logs -f``, ``shell``, ``proxy``), ``scale`` within maxSize (a new
broker joins and Flux sees it; a job for all the brokers, submitted before the
new one is up, waits for it) and ``delete``. The tests run in file order on
one MiniCluster, as a user would go through them, under Fluxion and under
sched-simple; on the real nodes where the cluster has them (the verbs then go
through the real kubelet's exec and attach)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.realflux.schedulers import Scheduler
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import flux_image_flags
from tests.realk8s.tools import (
    FLUXHOP,
    InNamespace,
    command_env,
    eventually,
    scratch_namespace,
    tty_session,
)

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME = "work"


class Work(InNamespace):
    scheduler: Scheduler

    def online(self) -> int:
        return super().online(NAME)


@pytest.fixture(scope="module")
def work(cluster: LocalCluster, needs_flux, scheduler: Scheduler) -> Iterator[Work]:
    with scratch_namespace(cluster) as (admin, namespace):
        work = Work(cluster, admin, namespace)
        work.scheduler = scheduler
        yield work


def test_create_waits_for_an_instance_that_stays(work: Work):
    chosen = ["--sched-simple"] if work.scheduler.simple else []
    done = work.fluxhop("create", "--name", NAME, "-N", "2", "--max-size", "3",
                        *flux_image_flags(work.cluster), *chosen, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    eventually("both brokers online", lambda: work.online() == 2, timeout=120)
    assert work.scheduler.loaded(work.checked("proxy", NAME, "flux", "module", "list"))
    listed = work.fluxhop("list")
    assert NAME in listed.stdout and "Running" in listed.stdout, listed.stdout


def test_an_ensemble_in_one_submit_and_its_jobs(work: Work):
    done = work.fluxhop("submit", NAME, "--cc", "1-20", "--", "sh", "-c", "echo job {cc}")
    assert done.returncode == 0, done.stderr
    ids = done.stdout.split()
    assert len(ids) == 20 and len(set(ids)) == 20

    def finished() -> bool:
        jobs = json.loads(work.fluxhop("jobs", NAME, "-a", "-o", "json").stdout)
        mine = {job["id"]: job for job in jobs if job["id"] in ids}
        return len(mine) == 20 and all(job["state"] == "INACTIVE" for job in mine.values())

    eventually("the 20 jobs done", finished, timeout=120)
    table = work.fluxhop("jobs", NAME, "-a").stdout.splitlines()
    assert table[0].split()[:4] == ["JOBID", "USER", "NAME", "ST"] and len(table) >= 21


def test_attach_and_watch_carry_output_and_exit_code(work: Work):
    submitted = work.fluxhop("submit", NAME, "--", "sh", "-c", 'echo "a  b"; exit 6')
    jobid = submitted.stdout.strip()
    attached = work.fluxhop("attach", NAME, jobid)
    assert (attached.returncode, attached.stdout) == (6, "a  b\n"), attached.stderr
    watched = work.fluxhop("submit", NAME, "--watch", "--", "sh", "-c", "echo watched; exit 2")
    assert watched.returncode == 2 and watched.stdout.splitlines()[1:] == ["watched"]


def test_status_counts_brokers_and_resources(work: Work):
    status = json.loads(work.fluxhop("status", NAME, "-o", "json").stdout)
    assert status["brokers"] == {"up": 2, "down": 1}  # rank 2 waits for a scale-up
    assert status["resources"]["free"]["nodes"] + status["resources"]["allocated"]["nodes"] == 2


def test_logs_follow_streams_rank_zero(work: Work):
    process = subprocess.Popen([str(FLUXHOP), "logs", NAME, "-f", "--namespace", work.namespace],
                               env=command_env(work.cluster), stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stdout is not None
    try:
        first = process.stdout.readline()  # the instance's output so far, then it keeps following
        assert first, "logs -f printed nothing"
        assert process.poll() is None  # still following a running instance
    finally:
        process.kill()
        process.communicate()


def test_shell_opens_a_terminal_with_flux_uri_set(work: Work):
    code, shown = tty_session(
        work.cluster, [str(FLUXHOP), "shell", NAME, "--namespace", work.namespace],
        b"echo rank=$(flux getattr rank) size=$(flux getattr size); exit\r", timeout=120,
    )  # fmt: skip
    assert code == 0, shown
    assert "rank=0 size=3\r\n" in shown, shown


def test_proxy_runs_a_local_flux_command_inside(work: Work):
    done = work.fluxhop(
        "proxy", NAME, "printf", "[%s]", "a  b", "$(flux resource list -s free -no {nnodes})"
    )
    assert (done.returncode, done.stdout) == (
        0,
        "[a  b][$(flux resource list -s free -no {nnodes})]",
    ), done.stderr
    done = work.fluxhop("proxy", NAME, "flux", "resource", "list", "-s", "free", "-no", "{nnodes}")
    assert (done.returncode, done.stdout.strip()) == (0, "2"), done.stderr


def test_scale_adds_a_broker_that_flux_sees(work: Work):
    done = work.fluxhop("scale", NAME, "--size", "3")
    assert done.returncode == 0, done.stderr
    # submitted before the new broker is up, a job for all three waits for it
    jobid = work.checked("submit", NAME, "-N", "3", "--", "hostname").strip()
    eventually("a third broker online", lambda: work.online() == 3, timeout=180)
    work.checked("proxy", NAME, "flux", "job", "wait-event", "-t", "120", jobid, "clean")
    result = work.checked("proxy", NAME, "flux", "jobs", "-no", "{result} {nnodes}", jobid)
    assert result.split() == ["COMPLETED", "3"]
    refused = work.fluxhop("scale", NAME, "--size", "4")
    assert refused.returncode != 0 and "maxSize 3" in refused.stderr


def test_a_job_larger_than_max_size_is_refused_at_submit(work: Work):
    done = work.fluxhop("submit", NAME, "-N", "4", "--", "hostname")
    assert done.returncode != 0 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "nsatisfiable" in line, line


def test_delete_removes_everything(work: Work):
    done = work.fluxhop("delete", NAME)
    assert done.returncode == 0, done.stderr
    paths = [f"/apis/batch/v1/namespaces/{work.namespace}/jobs", f"/api/v1/namespaces/{work.namespace}/pods",
             f"/api/v1/namespaces/{work.namespace}/secrets"]  # fmt: skip
    eventually(
        "nothing left", lambda: all(not work.admin.get(p)["items"] for p in paths), timeout=120
    )
