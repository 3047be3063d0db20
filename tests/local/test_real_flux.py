"""Against a real flux-core (only where one is on PATH): the local backend's
bundle must boot real brokers that Flux accepts."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from fluxhop.local.instance import LocalInstance
from fluxhop.spec.minicluster import MiniCluster
from tests.documents import minicluster_doc
from tests.local.fakeflux import job
from tests.realflux import flux_prefix, missing_flux

pytestmark = [
    pytest.mark.flux,
    pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or ""),
]


@pytest.fixture(autouse=True)
def real_flux_on_path(monkeypatch):
    """The local backend runs the flux on PATH: put the one found first."""
    monkeypatch.setenv("PATH", f"{flux_prefix()}/bin{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def short_tmp(monkeypatch):
    path = tempfile.mkdtemp(prefix="fh-", dir="/tmp")
    monkeypatch.setenv("TMPDIR", path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_hostname_on_four_ranks(short_tmp):
    out = io.StringIO()
    spec = job(["hostname"], nodes=4, tasks=4, name="real")
    code = LocalInstance(spec, stdout=out, stderr=io.StringIO(), join_timeout=60).run()
    assert code == 0
    assert len(out.getvalue().split()) == 4  # one line per task, one task per rank
    # each task asks its own broker for the host name it was given
    spec = job(["flux", "getattr", "hostname"], nodes=4, tasks=4, name="real")
    out = io.StringIO()
    assert LocalInstance(spec, stdout=out, stderr=io.StringIO()).run() == 0
    assert sorted(out.getvalue().split()) == ["real-0", "real-1", "real-2", "real-3"]


def test_a_failing_command_gives_its_exit_code(short_tmp):
    spec = job(["sh", "-c", "exit 3"], nodes=4, tasks=4, name="real")
    assert LocalInstance(spec, stdout=io.StringIO(), stderr=io.StringIO()).run() == 3


def test_each_task_sees_its_own_pods_node_name(short_tmp, monkeypatch):
    # A Flux job's environment is its submitter's: rank 0's, for the command
    # the entrypoint runs. The job shell's rc (node-env.lua) gives each
    # node's tasks that node's FLUXHOP_NODE_NAME. On one host there is no
    # downward API: each local rank is told a node name of its own here.
    given = LocalInstance._environment

    def with_node_name(self, flux, rank):
        return {**given(self, flux, rank), "FLUXHOP_NODE_NAME": f"node-{rank}"}

    monkeypatch.setattr(LocalInstance, "_environment", with_node_name)
    command = ["sh", "-c", 'echo "$FLUXHOP_NODE_NAME $(flux getattr hostname)"']
    out = io.StringIO()
    spec = job(command, nodes=3, tasks=3, name="where")
    assert LocalInstance(spec, stdout=out, stderr=io.StringIO(), join_timeout=60).run() == 0
    assert sorted(out.getvalue().splitlines()) == [f"node-{r} where-{r}" for r in range(3)]


def test_the_readiness_probe_waits_for_every_broker(short_tmp):
    # the pods' readinessProbe (ready.sh) against real brokers: rank 0 is not
    # ready while a worker has not joined, and is once the instance runs
    gate = Path(short_tmp) / "gate"
    os.mkfifo(gate)
    doc = minicluster_doc(
        "probe",
        size=2,
        tasks=2,
        containers=[
            {
                "image": "local",
                "command": "sleep 600",
                "commands": {"workerPre": f"read -r _ <{gate}\n"},  # held until the test writes
            }
        ],
    )
    instance = LocalInstance(
        MiniCluster.from_dict(doc), stdout=io.StringIO(), stderr=io.StringIO(), join_timeout=120
    )

    def probe(rank: int) -> int:
        assert instance.layout is not None
        script = Path(instance.layout.paths.config_dir) / "ready.sh"
        env = {
            "PATH": "/usr/bin:/bin",
            "FLUXHOP_FLUX_ROOT": instance.layout.flux_root(rank),
            "FLUXHOP_RANK": str(rank),
        }
        return subprocess.run(["bash", str(script)], env=env, check=False).returncode

    instance.start()
    try:
        instance.wait_ready()  # rank 0's broker answers, its quorum not met
        assert probe(0) == 1
        with gate.open("w") as opened:
            opened.write("go\n")
        instance.wait_running()
        assert probe(0) == 0
        assert probe(1) == 0
        # remembered: later probes ask Flux nothing
        assert (Path(instance.layout.flux_root(0)) / "run" / "instance-up").exists()
    finally:
        instance.stop()
