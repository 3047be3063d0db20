"""health.sh's drain and undrain decisions, against a stand-in ``flux`` that
keeps drains in a file as flux resource drain/undrain would (control flow
only: tests/local/test_real_flux_health.py and tests/realk8s/test_health.py
show real Flux taking them)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.processes import eventually

CERT = CurveCert.generate("runner")
FAKE_FLUX = textwrap.dedent(
    r'''
    #!/usr/bin/env python3
    """Stand-in flux: uptime; kvs (taken, not kept); resource drain [-f|-u] RANK REASON; resource
    drain -n -i RANK -o FMT; resource undrain RANK. Drains in $FAKE_DRAINS
    ({rank: reason}); $FAKE_DRAINS.fail holds how many drain/undrain calls
    fail first (a resource module not up yet); every call in $FAKE_DRAINS.log."""
    import json, os, sys
    path = os.environ["FAKE_DRAINS"]
    args = sys.argv[1:]
    with open(path + ".log", "a") as log:
        log.write(json.dumps(args) + "\n")
    if args[0] in ("uptime", "kvs"):
        sys.exit(0)
    drains = json.load(open(path)) if os.path.exists(path) else {}
    if args[:2] == ["resource", "drain"] and "-n" in args:
        rank = args[args.index("-i") + 1]
        if rank in drains:
            print(f"{rank}|{drains[rank]}")
        sys.exit(0)
    failing = int(open(path + ".fail").read()) if os.path.exists(path + ".fail") else 0
    if failing:
        open(path + ".fail", "w").write(str(failing - 1))
        print("flux-resource: ERROR: resource module not loaded", file=sys.stderr)
        sys.exit(1)
    if args[:2] == ["resource", "drain"]:
        force = "-f" in args
        rank, reason = [a for a in args[2:] if not a.startswith("-")]
        if rank in drains and not force:
            print(f"flux-resource: ERROR: [Errno 17] rank {rank} already drained", file=sys.stderr)
            sys.exit(1)
        drains[rank] = reason
    elif args[:2] == ["resource", "undrain"]:
        if drains.pop(args[2], None) is None:
            sys.exit(1)
    with open(path + ".new", "w") as new:  # whole, for the test's reads
        json.dump(drains, new)
    os.rename(path + ".new", path)
    '''
).lstrip()


class Runner:
    """health.sh for rank 1 with one check, ``sick``: it fails with the
    first line of the file ``sick_file`` while that file exists."""

    def __init__(self, root: Path, interval: int = 1, kind: str = "passive") -> None:
        self.root = root
        self.sick_file = root / "sick"
        command = f"if [ -e {self.sick_file} ]; then cat {self.sick_file}; exit 1; fi"
        check = {"name": "sick", "command": command, "intervalSeconds": interval, "kind": kind}
        container = {"image": "ubuntu:noble", "command": "true"}
        doc = minicluster_doc("hr", size=2, containers=[container], health={"checks": [check]})
        objects = render(MiniCluster.from_dict(doc), cert=CERT)
        data = next(o for o in objects if o["kind"] == "ConfigMap")["data"]
        self.config = root / "config"
        (self.config / "health").mkdir(parents=True)
        for key in ("health.sh", "health-once.sh", "health-checks.sh"):
            (self.config / key).write_text(data[key])
        (self.config / "health" / "sick.sh").write_text(data["health.sick.sh"])
        self.flux = root / "flux"
        self.flux.write_text(FAKE_FLUX)
        self.flux.chmod(0o755)
        self.drains_file = root / "drains.json"
        (root / "run" / "broker").mkdir(parents=True)
        self.process: subprocess.Popen[str] | None = None

    def drains(self) -> dict[str, str]:
        return json.loads(self.drains_file.read_text()) if self.drains_file.exists() else {}

    def set_drains(self, drains: dict[str, str]) -> None:
        self.drains_file.write_text(json.dumps(drains))

    def calls(self) -> list[list[str]]:
        log = Path(f"{self.drains_file}.log")
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def start(self) -> None:
        env = {**os.environ, "FLUXHOP_CONFIG_DIR": str(self.config),
               "FAKE_DRAINS": str(self.drains_file)}  # fmt: skip
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                ["bash", str(self.config / "health.sh"), "1", str(self.flux),
                 str(self.root / "run" / "broker")],
                env=env, start_new_session=True, stderr=log, text=True,
            )  # fmt: skip

    @property
    def log(self) -> Path:
        return self.root / "runner.log"

    def said(self) -> str:
        """What the runner has logged so far."""
        return self.log.read_text() if self.log.exists() else ""

    def settled(self) -> None:
        """Wait for a round that started after now to be decided: the
        result file written twice more (its decision follows each write)."""
        result = self.root / "run" / "health" / "sick"
        for _ in range(2):
            seen = result.stat().st_mtime_ns if result.exists() else 0
            eventually("a new round of checks",
                       lambda seen=seen: result.exists() and result.stat().st_mtime_ns != seen)  # fmt: skip

    def stop(self) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)


@pytest.fixture
def runner(tmp_path):
    made = Runner(tmp_path)
    yield made
    if made.process is not None and made.process.poll() is None:
        made.stop()


def test_a_failing_check_drains_and_a_passing_one_undrains(runner):
    runner.start()
    runner.sick_file.write_text("3 of 4 GPUs present\nmore\n")
    eventually("drained", lambda: runner.drains() == {"1": "health: sick: 3 of 4 GPUs present"})
    runner.sick_file.write_text("2 of 4 GPUs present\n")  # worse: the reason follows
    eventually(
        "the new reason", lambda: runner.drains() == {"1": "health: sick: 2 of 4 GPUs present"}
    )
    runner.sick_file.unlink()
    eventually("undrained", lambda: runner.drains() == {})
    # each change said in the pod's log, once Flux has taken it
    undrained = "fluxhop: health: rank 1 undrained: every check passes"
    eventually("the undrain said", lambda: undrained in runner.said())
    assert "fluxhop: health: rank 1 drained: health: sick: 3 of 4 GPUs present\n" in runner.said()


@pytest.mark.parametrize("reason", ["maintenance", ""])
def test_someone_elses_drain_is_never_touched(runner, reason):
    runner.set_drains({"1": reason})  # an admin's, with a reason or none
    runner.sick_file.write_text("disk full\n")
    runner.start()
    runner.settled()
    assert runner.drains() == {"1": reason}
    runner.sick_file.unlink()
    runner.settled()
    assert runner.drains() == {"1": reason}
    assert not [c for c in runner.calls() if "undrain" in c or "-f" in c]


def test_a_drain_flux_refuses_is_tried_again_each_second(tmp_path):
    # an hour's interval: the retry cannot wait for the next round
    runner = Runner(tmp_path, interval=3600)
    Path(f"{runner.drains_file}.fail").write_text("2")
    runner.sick_file.write_text("bad\n")
    runner.start()
    try:
        eventually("drained after two refusals", lambda: runner.drains() == {"1": "health: sick: bad"},
                   timeout=30)  # fmt: skip
    finally:
        runner.stop()


def test_a_restarted_pod_lifts_the_drain_health_left(runner):
    runner.set_drains({"1": "health: sick: bad"})  # from before the pod's restart
    runner.start()
    eventually("undrained", lambda: runner.drains() == {})


def test_a_restarted_pod_with_only_active_checks_lifts_the_drain_too(tmp_path):
    # rank 1 runs no active check itself, and a drained rank gets none: its
    # first round lifts the drain all the same (its new pod has no failure)
    runner = Runner(tmp_path, interval=3600, kind="active")
    runner.set_drains({"1": "health: sick: bad"})
    runner.start()
    try:
        eventually("undrained", lambda: runner.drains() == {}, timeout=30)
    finally:
        runner.stop()
