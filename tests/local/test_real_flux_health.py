"""spec.health against real Flux (only where one is on PATH): the runner in
each pod (render/templates/health.sh) drains the rank whose check fails,
with the check's first line as the reason, undrains it once the check
passes, and never touches an admin's drain."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

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


@pytest.fixture
def instance(short_tmp):  # noqa: F811
    doc = minicluster_doc(
        "health",
        size=3,
        interactive=True,
        containers=[{"image": "local"}],
        health={"checks": [
            {"name": "sick", "command": SICK, "intervalSeconds": 1},
            {"name": "fine", "command": "fluxhop_writable /tmp", "intervalSeconds": 1},
        ]},
    )  # fmt: skip
    running = LocalInstance(
        MiniCluster.from_dict(doc), stdout=io.StringIO(), stderr=io.StringIO(), join_timeout=120
    )
    running.start()
    try:
        running.wait_running()
        yield running
    finally:
        running.stop()


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
