"""`fluxhop run --local` end to end with the stand-in flux (tests/local)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluxhop.cli import main
from tests.processes import default_signals

LAUNCH = "import sys; from fluxhop.cli import main; sys.exit(main())"


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_local_streams_and_exits_with_the_job_code(fake_flux, capsys):
    fake_flux.set(FAKE_SIZE=2)
    code, out, err = cli(capsys, "run", "--local", "-N", "2", "--", "sh", "-c", "echo out; exit 3")
    assert code == 3, err
    assert out == "out\n"
    assert err == ""  # quiet, like flux start (-v shows the brokers' lines)
    assert fake_flux.all_gone()
    assert not list(Path(os.environ["TMPDIR"]).glob("fluxhop-*"))


def test_pod_only_flags_say_they_do_not_apply_locally(fake_flux, capsys):
    fake_flux.set(FAKE_SIZE=1)
    code, _out, err = cli(capsys, "run", "--local", "--queue", "team-a", "--", "true")
    assert code == 0, err
    assert err == "fluxhop: --local runs no pods: --queue does not apply\n"
    flags = ["--toleration", "gpu:NoSchedule", "--cpu", "2", "--security", "restricted"]
    code, _out, err = cli(capsys, "run", "--local", *flags, "--flux-in-image", "--", "true")
    assert code == 0, err  # --cpu applies: it is each rank's cores in R
    assert err == "fluxhop: --local runs no pods: --toleration, --security do not apply\n"
    code, _out, err = cli(capsys, "run", "--local", "--cpu", "2", "--", "true")
    assert code == 0 and err == ""


@pytest.mark.parametrize("verb", [["run", "--local"], ["create", "--local", "--name", "grow"]])
def test_max_size_does_not_apply_locally_and_says_so(fake_flux, capsys, verb):
    """A local instance's brokers start at once and are never scaled: a
    maxSize would list ranks that never come, and a job for them wait for ever."""
    code, out, err = cli(capsys, *verb, "-N", "1", "--max-size", "4", "--", "hostname")
    assert (code, out) == (1, "")
    assert err == (
        "fluxhop: maxSize 4 does not apply to a local MiniCluster: all its brokers start at "
        "once and it cannot be scaled; drop --max-size (spec.maxSize) or give -N 4\n"
    )
    assert fake_flux.all_gone() and fake_flux.calls() == []


def test_a_failing_broker_shows_its_log_then_one_line(fake_flux, capsys):
    fake_flux.set(FAKE_SIZE=2, FAKE_FAIL_HOST="demo-1", FAKE_FAIL_MESSAGE="bad things")
    code, _out, err = cli(capsys, "run", "--local", "-N", "2", "--name", "demo", "--", "true")
    assert code == 1
    lines = err.splitlines()
    assert "  | rank 1: bad things" in lines
    assert lines[-1].startswith("fluxhop: the broker of rank 1 (demo-1) exited with status 1")
    assert fake_flux.all_gone()


def test_flux_missing_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = cli(capsys, "run", "--local", "-N", "2", "--", "true")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "flux is not on PATH" in err


def test_without_kubernetes_config_flux_on_path_runs_locally(
    fake_flux, monkeypatch, capsys, tmp_path
):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    fake_flux.set(FAKE_SIZE=2)
    code, out, err = cli(capsys, "run", "-N", "2", "--image", "x", "--", "echo", "hi")
    assert code == 0, err
    assert out == "hi\n" and "running on this machine" in err


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        preexec_fn=default_signals,
    )


def wait_for(condition, process, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            _out, err = process.communicate()
            raise AssertionError(f"gave up waiting (exit {process.returncode}): {err}")
        time.sleep(0.05)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_stop_every_broker(fake_flux, sig, status):
    fake_flux.set(FAKE_SIZE=3)
    process = spawn("run", "--local", "-N", "3", "--", "sleep", "60")
    wait_for(lambda: any(c["argv"][0] == "run" for c in fake_flux.calls()), process)
    process.send_signal(sig)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == status, err
    assert err.splitlines()[-1] == "fluxhop: interrupted; stopping the brokers"
    assert "Traceback" not in err
    assert fake_flux.all_gone()
    assert not list(Path(os.environ["TMPDIR"]).glob("fluxhop-*"))


@pytest.mark.parametrize("nodes", [1, 4])
def test_interactive_prints_the_uri_and_ctrl_c_shuts_down(fake_flux, nodes):
    fake_flux.set(FAKE_SIZE=nodes)
    process = spawn("run", "--local", "-N", str(nodes), "--name", "inter")
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # wait for the event: the instance says it is up
        seen.append(line)
        if "Use it with: flux proxy" in line:
            break
    else:
        raise AssertionError(f"the instance never came up: {''.join(seen)}")
    process.send_signal(signal.SIGINT)
    _out, rest = process.communicate(timeout=30)
    err = "".join(seen) + rest
    assert process.returncode == 0, err
    assert "Use it with: flux proxy local://" in err and "/rank-0/run/broker/local-0" in err
    assert f"{nodes} brokers on this machine" in err
    assert fake_flux.all_gone()
