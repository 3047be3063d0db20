"""`fluxhop status --local`: the status and the instance's metrics in one
process (local/inside.py), through STATUS_SCRIPT's shell as it runs in the
pods. With a stand-in flux everywhere: metrics.py absent, failing, printing
garbage or its numbers. With a real flux-core: the numbers of fluxhop's own
metrics.py are those flux jobs and flux resource list give in the instance."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from fluxhop.cli import main
from fluxhop.local.inside import LocalInside
from fluxhop.local.store import LocalStore
from tests.cluster.standin import write_env
from tests.realflux import flux_prefix, missing_flux
from tests.render.fluxmetrics import from_commands, wait_until
from tests.workload.test_inside import GOOD, METRICS

real_flux = pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or "")

STANDIN = """#!/bin/sh
printf '%s\\n' "$*" >> {log}
case "$1 $2" in
    "resource status") echo "avail 2 0-1 demo-[0-1]" ;;
    "resource list") echo "free 2 4 0 0-1 demo-[0-1]" ;;
    "queue status") echo "Job submission is enabled" ;;
    "python "*) shift; exec {python} "$@" ;;
    *) echo "stand-in flux: $*" >&2; exit 2 ;;
esac
"""


class Counting:
    """subprocess.run, counted: the status is one process."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args, **kwargs):
        import subprocess

        self.calls += 1
        return subprocess.run(*args, **kwargs)


@pytest.fixture
def standin(tmp_path) -> Path:
    log = tmp_path / "flux.log"
    flux = tmp_path / "flux"
    flux.write_text(STANDIN.format(log=log, python=sys.executable))
    flux.chmod(0o755)
    write_env(tmp_path / "root", flux_bin=str(flux))
    return tmp_path


def script(directory: Path, body: str) -> str:
    path = directory / "metrics.py"
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize(
    ("body", "metrics", "error"),
    [
        (None, None, None),  # not named: a MiniCluster without metrics.py
        ("absent", None, None),  # named, not there: the same, said nowhere
        (f"print({GOOD!r})", METRICS, None),
        (
            "import sys\nsys.stderr.write('reading flux failed: OSError: boom\\n')\nsys.exit(1)",
            None,
            "reading flux failed: OSError: boom",
        ),
        ("raise SystemExit(3)", None, "metrics.py exited with status 3"),
        ("print('{\"brokers\": ')", None, "metrics.py printed malformed JSON"),
        ("print('{}')", None, "metrics.py answered without a map brokers"),
    ],
)
def test_metrics_in_the_one_status_process(standin, body, metrics, error):
    path = None
    if body == "absent":
        path = str(standin / "nowhere" / "metrics.py")
    elif body is not None:
        path = script(standin, body)
    runner = Counting()
    inside = LocalInside(
        lambda name, submit: str(standin / "root"), runner=runner, metrics_script=path
    )
    status = inside.status("demo")
    assert runner.calls == 1
    assert (status.up, status.down, status.queue) == (2, 0, ["Job submission is enabled"])
    assert status.metrics == metrics
    if error is None:
        assert status.metrics_error is None
    else:
        assert status.metrics_error is not None and error in status.metrics_error
    called = (standin / "flux.log").read_text().splitlines()
    ran = [line for line in called if line.startswith("python ")]
    assert ran == ([] if body in (None, "absent") else [f"python {path} --once --json"])


def test_the_local_default_is_fluxhops_own_metrics_py():
    import fluxhop.render

    packaged = Path(fluxhop.render.__file__).parent / "templates" / "metrics.py"
    assert LocalInside(lambda name, submit: "").metrics_script == str(packaged)
    assert packaged.is_file()


# --- with a real flux-core ------------------------------------------------------------------


@pytest.fixture
def state(monkeypatch):
    """A state directory under a short path (broker socket paths are limited)."""
    directory = Path(tempfile.mkdtemp(prefix="fh-", dir="/tmp"))
    monkeypatch.setenv("FLUXHOP_STATE_DIR", str(directory / "s"))
    monkeypatch.setenv("PATH", f"{flux_prefix()}/bin{os.pathsep}{os.environ['PATH']}")
    yield directory / "s"
    shutil.rmtree(directory, ignore_errors=True)


def cli(capfd, *args):
    code = main([str(a) for a in args])
    out = capfd.readouterr()
    return code, out.out, out.err


class Flux:
    """flux commands in the local MiniCluster (what tests/render/fluxmetrics reads)."""

    def __init__(self, uri: str) -> None:
        self.env = {**os.environ, "FLUX_URI": uri}

    def __call__(self, *args: str, check: bool = True) -> str:
        import subprocess

        result = subprocess.run(
            [str(flux_prefix() / "bin" / "flux"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"flux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def wait(self, jobid: str, state: str) -> None:
        wait_until(
            lambda: self("jobs", "-n", "-o", "{state}", jobid).strip() == state,
            f"job {jobid} {state}",
        )


@real_flux
def test_status_numbers_are_the_instances(state, capfd, tmp_path):
    name = "numbers"
    code, _, err = cli(capfd, "create", "--local", "-N", "2", "--name", name)
    assert code == 0, err
    try:
        flux = Flux(LocalStore().require(name).uri)
        ids = {}
        # finished first (the queue is first come, first served): one failed, one completed
        for key, command in (("failed", ["sh", "-c", "exit 3"]), ("completed", ["true"])):
            code, out, err = cli(capfd, "submit", "--local", name, "--", *command)
            assert code == 0, err
            ids[key] = out.strip()
            flux.wait(ids[key], "INACTIVE")
        code, out, err = cli(
            capfd, "submit", "--local", name, "-N", "1", "--exclusive", "--", "sleep", "inf"
        )
        ids["running"] = out.strip()
        flux.wait(ids["running"], "RUN")
        for key in ("pending", "held"):  # two nodes while one is taken: they wait
            code, out, err = cli(capfd, "submit", "--local", name, "-N", "2", "--", "true")
            ids[key] = out.strip()
            flux.wait(ids[key], "SCHED")
        flux("job", "urgency", ids["held"], "hold")
        wait_until(
            lambda: flux("jobs", "-n", "-o", "{urgency}", ids["held"]).strip() == "0",
            "the held job's urgency 0",
        )

        code, out, err = cli(capfd, "status", "--local", name, "-o", "json")
        assert code == 0, err
        status = json.loads(out)
        metrics = status["metrics"]
        assert metrics is not None, status["metrics_error"]
        assert status["metrics_error"] is None
        expected = from_commands(flux, pending_gpus=0)
        expected.pop("queue_jobs")  # the helper's instance configures queues; this one has none
        assert {key: metrics[key] for key in expected} == expected
        assert metrics["queue_jobs"] == {}
        # the numbers of this run, said outright (the comparison above could agree on nonsense)
        assert metrics["jobs"]["run"] == 1 and metrics["jobs"]["sched"] == 2
        assert metrics["jobs_result"]["completed"] == 1 and metrics["jobs_result"]["failed"] == 1
        assert metrics["jobs_held"] == 1 and metrics["pending_nodes"] == 2
        assert metrics["pending_max_nodes"] == 2
        assert metrics["brokers"] == {"online": 2, "offline": 0, "lost": 0}
        assert metrics["nodes"]["allocated"] == 1
        # and they agree with the status' own flux resource list, from the same exec
        for state_ in ("free", "allocated", "down"):
            assert metrics["nodes"][state_] == status["resources"][state_]["nodes"]

        code, out, err = cli(capfd, "status", "--local", name)
        assert code == 0, err
        block = out[out.index("metrics:\n") :]
        assert "2 pending (1 held), 1 running, 0 cleanup, 2 inactive" in block
        assert "1 completed, 1 failed, 0 canceled, 0 timeout" in block
        assert "2 online, 0 offline, 0 lost" in block

        # a metrics.py that fails under the real flux python: the status stands, one line says why
        broken = script(tmp_path, "import sys\nsys.stderr.write('no numbers here\\n')\nsys.exit(1)")
        inside = LocalInside(
            lambda n, submit: LocalStore().running(n, submit=submit).flux_root,
            metrics_script=broken,
        )
        failed = inside.status(name)
        assert failed.up == 2 and failed.metrics is None
        assert failed.metrics_error == "no numbers here"
    finally:
        assert cli(capfd, "delete", "--local", name)[0] == 0


@real_flux
def test_a_jobspec_file_into_a_local_minicluster(state, capfd, tmp_path):
    """submit --local -f JOBSPEC: the same reader and flux job submit on stdin."""
    from fluxhop.flux.jobspec import from_command

    name = "specced"
    path = tmp_path / "job.json"
    path.write_text(from_command(["sh", "-c", "echo local jobspec; exit 4"], nodes=2).to_json())
    code, _, err = cli(capfd, "create", "--local", "-N", "2", "--name", name)
    assert code == 0, err
    try:
        code, out, err = cli(capfd, "submit", "--local", name, "-f", path, "--watch")
        assert (code, out) == (4, "local jobspec\nlocal jobspec\n"), err
    finally:
        assert cli(capfd, "delete", "--local", name)[0] == 0
