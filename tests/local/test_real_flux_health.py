"""spec.health against real Flux (only where one is on PATH): the runner in
each pod (render/templates/health.sh) drains the rank whose check fails,
with the check's first line as the reason, undrains it once the check
passes, and never touches an admin's drain; an active check runs as Flux
jobs on the idle nodes only, never beside a user's job."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fluxhop.local.instance import LocalInstance
from fluxhop.spec.minicluster import MiniCluster
from tests.documents import minicluster_doc
from tests.local.test_real_flux import real_flux_on_path, short_tmp  # noqa: F401  (fixtures)
from tests.processes import eventually
from tests.realflux import flux_prefix, missing_flux

pytestmark = [
    pytest.mark.flux,
    pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or ""),
]

# each rank's own Flux root is FLUXHOP_FLUX_ROOT here: a file there makes its check fail
SICK = 'if [ -e "$FLUXHOP_FLUX_ROOT/sick" ]; then echo "a sick file"; echo more; exit 1; fi'


def running(checks: list[dict[str, Any]]) -> Iterator[LocalInstance]:
    # two cores a rank (tasks / size): a job of one core leaves room on its node
    doc = minicluster_doc("health", size=3, tasks=6, interactive=True,
                          containers=[{"image": "local"}], health={"checks": checks})  # fmt: skip
    started = LocalInstance(
        MiniCluster.from_dict(doc), stdout=io.StringIO(), stderr=io.StringIO(), join_timeout=120
    )
    started.start()
    try:
        started.wait_running()
        yield started
    finally:
        started.stop()


@pytest.fixture
def instance(short_tmp):  # noqa: F811
    yield from running([
        {"name": "sick", "command": SICK, "intervalSeconds": 1},
        {"name": "fine", "command": "fluxhop_writable /tmp", "intervalSeconds": 1},
    ])  # fmt: skip


def with_active_check(root: str, interval: int, *others: dict[str, Any]) -> Iterator[LocalInstance]:
    """An instance with an active check, ``fabric``: each of its tasks logs
    its rank and the time to ``ran`` and fails on a rank with a file
    ``sick-<rank>`` (both in ``root``)."""
    command = (f'r=$(flux getattr rank); echo "$r $(date +%s.%N)" >>{root}/ran; '
               f'if [ -e {root}/sick-$r ]; then echo "bad fabric"; exit 1; fi')  # fmt: skip
    fabric = {"name": "fabric", "kind": "active", "command": command, "intervalSeconds": interval}
    for made in running([fabric, *others]):
        made.checks_dir = Path(root)  # type: ignore[attr-defined]
        yield made


@pytest.fixture
def active(short_tmp):  # noqa: F811
    yield from with_active_check(short_tmp, 1)


@pytest.fixture
def active_and_passive(short_tmp):  # noqa: F811
    """Rounds of a passive check each second between the active ones."""
    yield from with_active_check(short_tmp, 4, {"name": "fine", "command": "true",
                                                "intervalSeconds": 1})  # fmt: skip


def flux(instance: LocalInstance, *args: str) -> str:
    env = {**os.environ, "FLUX_URI": instance.uri}
    out = subprocess.run([f"{flux_prefix()}/bin/flux", *args], env=env, capture_output=True,
                         text=True, check=True, timeout=60)  # fmt: skip
    return out.stdout


def drains(instance: LocalInstance) -> dict[str, str]:
    listed = flux(instance, "resource", "drain", "-n", "-o", "{ranks}|{reason}")
    return dict(line.split("|", 1) for line in listed.splitlines() if line)


def sick(instance: LocalInstance, rank: int) -> Path:
    assert instance.layout is not None
    return Path(instance.layout.flux_root(rank)) / "sick"


def test_a_failing_check_drains_its_rank_until_it_passes(instance):
    flux(instance, "resource", "drain", "2", "maintenance")  # an admin's
    sick(instance, 1).touch()
    sick(instance, 2).touch()
    reason = "health: sick: a sick file"  # its first line
    eventually("rank 1 drained by health",
               lambda: drains(instance) == {"1": reason, "2": "maintenance"}, timeout=60)  # fmt: skip
    # each rank's results in the KVS, for the metrics (flux_health_checks, fluxhop status)
    # (published after the drain: until then flux kvs get finds no key)
    eventually("rank 1's results published",
               lambda: json.loads(flux(instance, "kvs", "get", "fluxhop.health.1"))
               == {"sick": [1, "a sick file"], "fine": [0, "exit 0"]},
               tolerate=(subprocess.CalledProcessError,))  # fmt: skip
    # a job asking for every node waits
    job = flux(instance, "submit", "-N3", "true").strip()
    assert flux(instance, "jobs", "-no", "{state}", job).strip() in ("SCHED", "DEPEND", "PRIORITY")
    sick(instance, 1).unlink()
    sick(instance, 2).unlink()
    eventually("rank 1 undrained", lambda: "1" not in drains(instance), timeout=60)
    # rank 2 passes too, but its drain is the admin's: health leaves it, as
    # decided after the round that passed (the rounds after it have come)
    results = Path(instance.layout.flux_root(2)) / "run" / "health" / "sick"
    eventually("rank 2's check passing again", lambda: results.read_text().startswith("0 "))
    for _ in range(2):
        seen = results.stat().st_mtime_ns
        eventually("another round", lambda seen=seen: results.stat().st_mtime_ns != seen)
    assert drains(instance) == {"2": "maintenance"}
    flux(instance, "resource", "undrain", "2")
    flux(instance, "job", "wait-event", "-t", "60", job, "clean")
    assert flux(instance, "jobs", "-no", "{result}", job).strip() == "COMPLETED"


def runs(instance: LocalInstance) -> list[tuple[int, float]]:
    """Each active check's task so far: its rank and when it ran."""
    ran = instance.checks_dir / "ran"  # type: ignore[attr-defined]
    lines = ran.read_text().splitlines() if ran.exists() else []
    return [(int(rank), float(when)) for rank, when in (line.split() for line in lines)]


def test_an_active_check_never_runs_beside_a_users_job(active):
    # one core of rank 1's: the rest of that node is idle, but not for a check
    job = flux(active, "submit", "-n1", "--requires=rank:1", "sleep", "120").strip()
    flux(active, "job", "wait-event", "-t", "60", job, "start")
    started = float(flux(active, "jobs", "-no", "{t_run}", job))

    def checked_twice_beside_it() -> bool:
        later = [rank for rank, when in runs(active) if when > started]
        return later.count(0) >= 2 and later.count(2) >= 2

    eventually("the idle ranks checked twice while the job runs", checked_twice_beside_it,
               timeout=60)  # fmt: skip
    assert flux(active, "jobs", "-no", "{state}", job).strip() == "RUN"  # still beside it
    flux(active, "cancel", job)
    flux(active, "job", "wait-event", "-t", "60", job, "clean")
    ended = float(flux(active, "jobs", "-no", "{t_inactive}", job))
    assert not [when for rank, when in runs(active) if rank == 1 and started <= when <= ended]
    eventually(
        "rank 1 checked again once its job is done",
        lambda: any(rank == 1 and when > ended for rank, when in runs(active)),
        timeout=60,
    )
    checks = flux(active, "jobs", "-a", "-no", "{name} {urgency}").split("\n")
    assert {line for line in checks if line} == {"fluxhop-health-fabric 1", "sleep 16"}


def test_a_job_the_instance_does_not_know_is_forgotten(active):
    # as after rank 0's broker restarted in its pod: the job file names a job
    # of the instance before; the checks go on
    assert active.layout is not None
    stale = Path(active.layout.flux_root(0)) / "run" / "health" / ".job.fabric"
    stale.write_text("ƒ2tqVnvj\n")
    seen = len(runs(active))
    eventually("two more rounds on every rank",
               lambda: all([r for r, _ in runs(active)[seen:]].count(rank) >= 2 for rank in range(3)),
               timeout=60)  # fmt: skip


def test_an_active_checks_drain_stands_until_an_admin_lifts_it(active_and_passive):
    instance = active_and_passive
    sick = instance.checks_dir / "sick-2"
    sick.touch()
    reason = "health: fabric: bad fabric"
    eventually("rank 2 drained by its active check", lambda: drains(instance) == {"2": reason},
               timeout=60)  # fmt: skip
    sick.unlink()
    drained_at = len(runs(instance))
    eventually("two more rounds", lambda: len(runs(instance)) >= drained_at + 4, timeout=60)
    assert drains(instance) == {"2": reason}  # a drained rank is not checked again
    flux(instance, "resource", "undrain", "2")  # an admin's judgement
    undrained_at = len(runs(instance))

    def checked_again() -> bool:
        # the passive rounds in the meantime do not drain it again
        assert drains(instance) == {}
        return 2 in [rank for rank, _ in runs(instance)[undrained_at:]]

    eventually("rank 2 checked again", checked_again, timeout=60)
    assert drains(instance) == {}
