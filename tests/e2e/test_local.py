"""``fluxhop run --local`` with real Flux: four real brokers on this machine,
driven through the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.realflux import flux_prefix

FLUXHOP = Path(sys.executable).parent / "fluxhop"


def run_local(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{flux_prefix()}/bin{os.pathsep}{os.environ['PATH']}"}
    env["TMPDIR"] = str(tmp)
    return subprocess.run(
        [str(FLUXHOP), "run", "--local", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_four_ranks_and_the_exit_code(workdir):
    done = run_local("-N", "4", "--", "flux", "getattr", "hostname", tmp=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # quiet, like flux start
    names = sorted(done.stdout.split())
    assert len(names) == 4 and len(set(names)) == 4  # each rank's broker has its own host name
    failed = run_local("-N", "4", "--", "sh", "-c", "exit 3", tmp=workdir)
    assert failed.returncode == 3, failed.stderr
    assert not list(workdir.iterdir())  # every run directory is gone


def test_the_tasks_of_local_ranks_are_not_piled_onto_one_cpu(workdir):
    """Every local rank's R claims the same first cores of this host; bound to
    them (Flux's default cpu-affinity), all tasks of all ranks ran on CPU 0."""
    command = ["grep", "Cpus_allowed_list", "/proc/self/status"]
    done = run_local("-N", "2", "-n", "2", "--", *command, tmp=workdir)
    assert done.returncode == 0, done.stderr
    ours = next(
        line
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("Cpus_allowed_list")
    )
    assert done.stdout.splitlines() == [ours, ours]
