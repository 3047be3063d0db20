"""LocalInstance: N entrypoints as processes, with a stand-in flux."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest

from fluxhop.errors import (
    BrokerFailed,
    FluxTooOld,
    JoinTimeout,
    LocalToolMissing,
    PortConflict,
    WaitTimeout,
)
from fluxhop.local.instance import LocalInstance, free_ports
from tests.local.fakeflux import job

ARGV = ["python3", "-c", "import sys; print(sys.argv[1:])", "two words", "$HOME", "*"]


def instance(spec, **kwargs):
    kwargs.setdefault("stdout", io.StringIO())
    kwargs.setdefault("stderr", io.StringIO())
    return LocalInstance(spec, **kwargs)


def test_runs_the_job_streams_rank_0_and_cleans_up(fake_flux):
    fake_flux.set(FAKE_SIZE=3)
    local = instance(job(ARGV, nodes=3, tasks=6))
    code = local.run()
    assert code == 0
    assert local.stdout.getvalue() == repr(ARGV[3:]) + "\n"
    starts = fake_flux.starts()
    assert len(starts) == 3
    root = local.layout.root
    hosts = sorted(a for s in starts for a in s["argv"] if a.startswith("-Shostname="))
    assert hosts == ["-Shostname=demo-0", "-Shostname=demo-1", "-Shostname=demo-2"]
    for start in starts:
        assert f"--config-path={root}/config/broker" in start["argv"]
    rundirs = sorted(a for s in starts for a in s["argv"] if a.startswith("-Srundir="))
    assert rundirs == [f"-Srundir={root}/rank-{i}/run/broker" for i in range(3)]
    (run,) = [c for c in fake_flux.calls() if c["argv"][0] == "run"]
    # every local rank claims the same cores of this one host: bound, all tasks share them
    unbound = ["-o", "cpu-affinity=off"]
    assert run["argv"] == ["run", "-N", "3", "-n", "6", "--exclusive", *unbound, *ARGV]
    assert not Path(root).exists()
    assert fake_flux.all_gone()
    assert all(b.process.returncode is not None for b in local.brokers)


def test_an_enclosing_instance_is_not_inherited(fake_flux):
    """Run inside a Flux job, the brokers must boot their own instance."""
    fake_flux.set(FAKE_SIZE=2, FLUX_URI="local:///run/flux/local", PMI_RANK="3")
    assert instance(job(["true"], nodes=2)).run() == 0
    for start in fake_flux.starts():
        assert start["env"]["FLUX_URI"] is None and start["env"]["PMI_RANK"] is None


def test_the_exit_code_of_the_job_is_returned(fake_flux):
    fake_flux.set(FAKE_SIZE=2)
    assert instance(job(["sh", "-c", "exit 7"], nodes=2)).run() == 7


def test_files_on_disk_while_running(fake_flux):
    fake_flux.set(FAKE_SIZE=2)
    local = instance(job(["sh", "-c", "sleep 0.5"], nodes=2))
    local.start()
    try:
        root = Path(local.layout.root)
        broker = (root / "config" / "broker" / "broker.toml").read_text()
        for port in local.ports:
            assert f'bind = "tcp://127.0.0.1:{port}"' in broker
        assert "noverify = true" in broker
        cert = root / "curve" / "curve.cert"
        assert cert.stat().st_mode & 0o777 == 0o400
        assert f'curve_cert = "{cert}"' in broker
        assert local.wait() == 0
    finally:
        local.stop()
    assert not root.exists()


def test_a_failing_worker_stops_everything_and_shows_its_log(fake_flux):
    fake_flux.set(FAKE_SIZE=3, FAKE_FAIL_HOST="demo-2", FAKE_FAIL_MESSAGE="broker: boom at boot")
    local = instance(job(["sleep", "30"], nodes=3))
    started = time.monotonic()
    with pytest.raises(BrokerFailed) as caught:
        local.run()
    assert time.monotonic() - started < 20
    assert "rank 2 (demo-2) exited with status 1" in str(caught.value)
    assert any("broker: boom at boot" in line for line in caught.value.context)
    assert fake_flux.all_gone()
    assert not Path(local.layout.root).exists()


def test_a_port_taken_by_someone_else_is_named(fake_flux):
    fake_flux.set(
        FAKE_SIZE=2,
        FAKE_FAIL_HOST="demo-1",
        FAKE_FAIL_MESSAGE="broker.err[1]: overlay_bind: Address already in use",
    )
    with pytest.raises(PortConflict, match=r"rank 1 \(demo-1\) could not bind 127\.0\.0\.1:\d+"):
        instance(job(["true"], nodes=2)).run()
    assert fake_flux.all_gone()


def test_a_broker_that_never_joins_times_out_with_logs(fake_flux):
    fake_flux.set(FAKE_SIZE=3, FAKE_NO_JOIN="demo-1")
    local = instance(job(["true"], nodes=3), join_timeout=1.5)
    with pytest.raises(JoinTimeout) as caught:
        local.run()
    assert "did not all join within 1.5s" in str(caught.value)
    assert any("rank 1: broker on demo-1: still trying" in line for line in caught.value.context)
    assert fake_flux.all_gone()


def test_wait_timeout(fake_flux):
    fake_flux.set(FAKE_SIZE=1)
    local = instance(job(["sleep", "30"], nodes=1))
    local.start()
    try:
        with pytest.raises(WaitTimeout, match=r"did not finish within 0\.5s"):
            local.wait(timeout=0.5)
    finally:
        local.stop()
    assert fake_flux.all_gone()


def test_interactive_instance_reports_its_uri_and_stops(fake_flux):
    fake_flux.set(FAKE_SIZE=2)
    local = instance(job([], nodes=2))
    assert local.interactive
    local.start()
    try:
        uri = local.wait_ready()
        assert uri == f"local://{local.layout.root}/rank-0/run/broker/local-0"
        assert Path(uri.removeprefix("local://")).exists()
        stopper = threading.Timer(0.3, lambda: os.kill(local.brokers[0].process.pid, 15))
        stopper.start()
        local.serve()  # returns once rank 0 is gone
    finally:
        local.stop()
    assert fake_flux.all_gone()


@pytest.mark.parametrize("verbose", [False, True])
def test_quiet_like_flux_start_unless_verbose(fake_flux, verbose):
    """A one-line job printed 25 broker info lines; flux start prints none."""
    fake_flux.set(FAKE_SIZE=2, FAKE_BROKER_LOG=1)
    err = io.StringIO()
    assert instance(job(["true"], nodes=2), stderr=err, verbose=verbose).run() == 0
    shown = err.getvalue()
    assert "<4>broker.warning[0]: a warning worth seeing" in shown  # warnings always
    assert ("<6>broker.info" in shown) is verbose
    assert ("fluxhop: instance finished" in shown) is verbose


def test_flux_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalToolMissing, match=r"flux is not on PATH: install flux-core 0\.82"):
        instance(job(["true"])).run()


def test_flux_too_old(fake_flux):
    fake_flux.set(FAKE_FLUX_VERSION="0.81.0")
    with pytest.raises(FluxTooOld, match=r"flux-core 0\.81\.0 .* needs 0\.82 or newer"):
        instance(job(["true"])).run()
    assert fake_flux.starts() == []


def test_free_ports_are_distinct_and_bindable():
    import socket

    ports = free_ports(8)
    assert len(set(ports)) == 8
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
