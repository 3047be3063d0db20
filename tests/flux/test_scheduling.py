"""What broker.toml's scheduler tables make real Flux do, under Fluxion and
under sched-simple: on an instance whose bootstrap lists more hosts than
have joined (a MiniCluster that can grow, or whose ranks start late), a job
larger than the ranks up waits for them and runs once they join; a job
larger than every listed host is refused at submit with one line.

Two brokers on 127.0.0.1: rank 0 starts alone (quorum 1), rank 1 joins when
the test says. Under Fluxion's ``fcfs`` the waiting job fails instead (the
reason fluxhop chooses ``easy`` for an elastic MiniCluster): checked too, so
that this test fails the day Fluxion changes either way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fluxhop.flux.broker import BrokerConfig, HostEntry
from fluxhop.flux.curve import CurveCert
from fluxhop.flux.resources import ResourceSet
from fluxhop.local.processes import free_ports
from tests.processes import eventually
from tests.realflux import flux_prefix, missing_fluxion
from tests.realflux.schedulers import FLUXION, Scheduler

pytestmark = pytest.mark.flux
HOSTS = ["h0", "h1"]


@dataclass
class Instance:
    """Rank 0 of a two-host instance, and rank 1 once started."""

    root: Path
    scheduler: Scheduler
    queue_policy: str | None
    brokers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        ports = free_ports(len(HOSTS))
        config = BrokerConfig(
            hosts=[
                HostEntry(host, bind=f"tcp://127.0.0.1:{port}", connect=f"tcp://127.0.0.1:{port}")
                for host, port in zip(HOSTS, ports, strict=True)
            ],
            curve_cert=str(self.root / "curve.cert"),
            resource_path=str(self.root / "R"),
            resource_noverify=True,
            queue_policy=self.queue_policy,
            simple_scheduler=self.scheduler.simple,
            check_feasibility=True,
            compact=False,
        )
        (self.root / "conf").mkdir()
        (self.root / "conf" / "broker.toml").write_text(config.to_toml())
        (self.root / "R").write_text(ResourceSet.from_nodes("h[0-1]", cores=1).to_json())
        cert = self.root / "curve.cert"
        cert.write_text(CurveCert.generate("test").to_zpl())
        cert.chmod(0o400)

    @property
    def flux(self) -> str:
        return str(flux_prefix() / "bin" / "flux")

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUX_", "PMI"))}
        env["FLUXION_RESOURCE_OPTIONS"] = ""  # as the entrypoint does
        return env

    def start(self, rank: int) -> None:
        rundir = self.root / f"run-{rank}"
        rundir.mkdir()
        argv = [self.flux, "start", f"--config-path={self.root / 'conf'}",
                f"-Shostname={HOSTS[rank]}", f"-Srundir={rundir}", "-Sbroker.quorum=1",
                "-Sbroker.rc2_none=1", "-Slog-stderr-level=4"]  # fmt: skip
        with open(self.root / f"rank-{rank}.log", "w") as log:
            self.brokers.append(subprocess.Popen(argv, env=self.environment(), stderr=log))

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A flux command against rank 0."""
        env = {**self.environment(), "FLUX_URI": self.uri()}
        done = subprocess.run([self.flux, *args], env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def uri(self) -> str:
        return f"local://{self.root}/run-0/local-0"

    def wait_running(self) -> None:
        """Until rank 0 is in its RUN state (rc1 done: the scheduler loaded)."""
        eventually("rank 0's socket", (self.root / "run-0" / "local-0").exists)
        self("python", "-c", "import flux; flux.Flux().rpc('state-machine.wait').get()")

    def state(self, jobid: str) -> str:
        return self("jobs", "-no", "{state}", jobid).stdout.strip()

    def blocked(self, jobid: str) -> bool:
        """The scheduler has the job and keeps it waiting (it has not failed it)."""
        if self.state(jobid) != "SCHED":
            return False
        stats = json.loads(self("module", "stats", self.scheduler.module).stdout)
        if self.scheduler is FLUXION:
            short = self("job", "id", "--to=f58plain", jobid).stdout.strip()
            queues = stats["queues"]["default"]["pending_queues"]
            return any(short in ids or jobid in ids for ids in queues.values())
        return stats["pending_jobs"] >= 1 and stats["sched_passes"] >= 1

    def stop(self) -> None:
        if self.brokers and self.brokers[0].poll() is None:
            self("shutdown", "--quiet", check=False)
        for broker in self.brokers:
            try:
                broker.wait(60)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()


@contextmanager
def started(scheduler: Scheduler, queue_policy: str | None) -> Iterator[Instance]:
    """Rank 0 of a two-host instance, taking jobs; everything gone afterwards."""
    root = Path(tempfile.mkdtemp(prefix="fh-sched-", dir="/tmp"))
    made = Instance(root, scheduler, queue_policy)
    try:
        made.start(0)
        made.wait_running()
        yield made
    finally:
        made.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def instance(scheduler: Scheduler) -> Iterator[Instance]:
    """Under each scheduler, as fluxhop configures it for an elastic MiniCluster."""
    with started(scheduler, None if scheduler.simple else "easy") as made:
        yield made


def test_a_job_larger_than_the_ranks_up_waits_for_them(instance: Instance, scheduler: Scheduler):
    assert scheduler.loaded(instance("module", "list").stdout)
    jobid = instance("submit", "-N2", "hostname").stdout.strip()
    eventually("the job held by the scheduler", lambda: instance.blocked(jobid))
    instance.start(1)
    instance("job", "wait-event", "-t", "120", jobid, "clean")
    assert instance("jobs", "-no", "{result} {nnodes}", jobid).stdout.split() == ["COMPLETED", "2"]


def test_a_job_larger_than_every_host_is_refused_at_submit(instance: Instance):
    done = instance("submit", "-N3", "hostname", check=False)
    assert done.returncode != 0
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "nsatisfiable" in line, line


def test_under_fluxion_fcfs_the_same_job_fails():
    """Why fluxhop does not leave an elastic MiniCluster on fcfs."""
    if missing_fluxion():
        pytest.skip(missing_fluxion())
    with started(FLUXION, "fcfs") as instance:
        jobid = instance("submit", "-N2", "hostname").stdout.strip()
        instance("job", "wait-event", "-t", "120", jobid, "clean")
        assert instance("jobs", "-no", "{result}", jobid).stdout.strip() == "FAILED"
        exception = instance("job", "eventlog", jobid).stdout
    assert 'type="alloc"' in exception and "unsatisfiable" in exception
