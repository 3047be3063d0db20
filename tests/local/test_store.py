"""Long-lived local MiniClusters (local/store.py).

Without Flux: the store's bookkeeping with stand-in "brokers" (sleeping
process groups) - a stale entry is said and cleaned, delete leaves no process
and no directory. With a real flux-core: the whole lifecycle through the CLI
(create --local, submit, jobs, status, watch, logs, delete) and Ctrl-C during
create leaving nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import pytest

from fluxhop.cli import main
from fluxhop.errors import FluxhopWarning, NotFound
from fluxhop.local.store import RECORD, LocalStore, Record
from tests.processes import default_signals
from tests.realflux import flux_prefix, missing_flux

real_flux = pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or "")
LAUNCH = "import sys; from fluxhop.cli import main; sys.exit(main())"


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("FLUXHOP_STATE_DIR", str(directory))
    return directory


def running(pid: int) -> bool:
    """Alive and not a zombie (this test process may be the unreaping parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def processes_under(path: Path) -> list[int]:
    """Running processes whose command line or environment names ``path``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(path).encode() in text and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def described(pids: list[int]) -> str:
    """Each process's stat and command line, for a failure's message."""
    lines = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().strip()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        lines.append(f"{stat} :: {argv}")
    return "\n".join(lines)


def fake_instance(state: Path, name: str, size: int) -> tuple[Record, list[subprocess.Popen]]:
    """A detached "instance" whose brokers are sleeping process groups."""
    directory = state / name
    directory.mkdir(parents=True)
    brokers = [
        subprocess.Popen(["sleep", "300"], start_new_session=True, preexec_fn=default_signals)
        for _ in range(size)
    ]
    record = Record(
        name=name,
        size=size,
        interactive=True,
        uri="local:///nonexistent",
        flux_root=str(directory / "rank-0"),
        pgids=[b.pid for b in brokers],
        created=time.time(),
        directory=str(directory),
    )
    (directory / RECORD).write_text(json.dumps(asdict(record)))
    (directory / "output.log").write_text("line 1\nline 2\n")
    return record, brokers


def test_a_running_entry_is_found_listed_and_logged(state):
    record, brokers = fake_instance(state, "demo", 3)
    store = LocalStore()
    try:
        assert store.require("demo") == record
        (status,) = store.list()
        assert (status.name, status.state, status.pods) == ("demo", "Running", {"Running": 3})
        assert list(store.logs("demo")) == ["line 1\n", "line 2\n"]
    finally:
        store.delete("demo")
    for broker in brokers:
        broker.wait(timeout=30)  # delete ended every group
    assert not (state / "demo").exists()


def test_a_stale_entry_is_said_and_cleaned_never_left(state):
    record, brokers = fake_instance(state, "demo", 3)
    os.killpg(record.pgids[1], signal.SIGKILL)
    brokers[1].wait(timeout=30)
    with pytest.warns(
        FluxhopWarning,
        match="local MiniCluster demo had died: the brokers of rank 1 are gone; removed it",
    ):
        assert LocalStore().list() == []
    for broker in (brokers[0], brokers[2]):
        broker.wait(timeout=30)  # the survivors were stopped, not left as zombies
    assert not (state / "demo").exists()
    with pytest.raises(NotFound, match="no local MiniCluster demo"):
        LocalStore().require("demo")


def test_finished_batch_jobs_keep_their_exit_code_until_deleted(state):
    record, brokers = fake_instance(state, "batch", 1)
    (state / "batch" / "exit-code").write_text("3\n")
    os.killpg(record.pgids[0], signal.SIGKILL)
    brokers[0].wait(timeout=30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not stale: it finished
        status = LocalStore().status("batch")
    assert (status.state, status.exit_code) == ("Failed", 3)
    LocalStore().delete("batch")
    assert not (state / "batch").exists()


def test_delete_of_nothing_is_one_line(state, capsys):
    code = main(["delete", "--local", "nosuch"])
    err = capsys.readouterr().err
    assert (
        code != 0
        and err == "fluxhop: no local MiniCluster nosuch (fluxhop list --local shows them)\n"
    )
    assert main(["delete", "--local", "nosuch", "--ignore-not-found"]) == 0


# --- with a real flux-core ------------------------------------------------------------------


@pytest.fixture
def flux_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{flux_prefix()}/bin{os.pathsep}{os.environ['PATH']}")


def cli(capfd, *args):
    code = main([str(a) for a in args])
    out = capfd.readouterr()
    return code, out.out, out.err


@real_flux
def test_the_whole_local_lifecycle(state, flux_path, capfd):
    code, _, err = cli(capfd, "create", "--local", "-N", "3", "--name", "life", "--queue", "q")
    assert code == 0, err
    assert "minicluster/life created (local, 3 brokers)" in err
    assert "fluxhop: --local runs no pods: --queue does not apply\n" in err
    code, out, err = cli(
        capfd,
        "submit",
        "--local",
        "life",
        "--cc",
        "1-20",
        "--",
        "sh",
        "-c",
        "exit $((FLUX_JOB_CC % 3))",
    )
    assert code == 0, err
    ids = out.split()
    assert len(ids) == 20
    code, out, _ = cli(
        capfd, "submit", "--local", "life", "--watch", "--", "sh", "-c", "echo w; exit 6"
    )
    assert code == 6 and out.endswith("w\n")
    code, out, err = cli(capfd, "jobs", "--local", "life", "-a", "-o", "json")
    assert code == 0, err
    jobs = {job["id"]: job for job in json.loads(out)}
    assert set(ids) <= set(jobs)
    codes = sorted(jobs[i]["returncode"] for i in ids)
    assert codes == sorted(cc % 3 for cc in range(1, 21))  # the mixed exit codes, as flux saw them
    code, out, _ = cli(capfd, "status", "--local", "life", "-o", "json")
    assert json.loads(out)["brokers"] == {"up": 3, "down": 0}
    code, out, _ = cli(capfd, "list", "--local")
    assert out.split("\n")[1].split()[:4] == ["life", "local", "3", "Running"]
    pgids = LocalStore().require("life").pgids
    code, _, err = cli(capfd, "delete", "--local", "life")
    assert code == 0, err
    assert not any(running(p) for p in pgids)
    assert not (state / "life").exists()
    assert processes_under(state) == []


@real_flux
def test_a_batch_job_reports_its_exit_code(state, flux_path, capfd):
    code, _, err = cli(
        capfd,
        "create",
        "--local",
        "-N",
        "2",
        "--name",
        "batch",
        "--",
        "sh",
        "-c",
        "echo done; exit 3",
    )
    assert code == 0, err
    code, out, _ = cli(capfd, "logs", "--local", "batch", "-f")  # returns when rank 0 ends
    assert out == "done\ndone\n"  # one task per node
    code, out, _ = cli(capfd, "get", "--local", "batch", "-o", "json")
    status = json.loads(out)
    assert (status["state"], status["exitCode"]) == ("Failed", 3)
    code, _, err = cli(capfd, "submit", "--local", "batch", "--", "true")
    assert code != 0 and "MiniCluster batch has finished (exit code 3)" in err
    assert cli(capfd, "delete", "--local", "batch")[0] == 0
    assert processes_under(state) == []


@real_flux
def test_ctrl_c_during_create_leaves_nothing(state, flux_path):
    """SIGINT once the brokers have started (their logs exist), before rank 0
    takes jobs: no broker process, no directory."""
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, "create", "--local", "-N", "3", "--name", "cut"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    log = state / "cut" / "rank-2.log"
    # wait for the event: the last broker has been started (its log file opened)
    while not log.exists():
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.01)  # a file appearing has no event to block on
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    if process.returncode == 0:  # it came up before the signal arrived: a clean delete then
        assert main(["delete", "--local", "cut"]) == 0
    else:
        assert process.returncode == 130, err
        assert "interrupted" in err
    assert not (state / "cut").exists()
    left = processes_under(state)
    assert left == [], described(left)
