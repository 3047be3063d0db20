"""spec.health on the real cluster, with real Flux and Fluxion: a passive
check made to fail on one rank (a file flipped in its pod) drains that rank
within its interval, with the check's first line as the reason; a job asking
for every node waits; the check passing again undrains it; an admin's drain
on another rank, whose check fails and passes too, is left alone. An active
check runs as Flux jobs on the idle nodes only: never on a node where a
user's job runs, even one using a part of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import flux_image_flags, placed_minicluster
from tests.realk8s.tools import InNamespace, eventually, scratch_namespace

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME = "kept"
RESULT = "/mnt/flux/run/health/sick"  # rank 2's last result, in its pod
SICK = 'test ! -e /tmp/sick || { echo "a sick file"; echo more; exit 1; }'  # /tmp: the pod's own


class Kept(InNamespace):
    def flux(self, *args: str) -> str:
        return self.checked("proxy", NAME, "flux", *args)

    def drains(self) -> dict[str, str]:
        listed = self.flux("resource", "drain", "-n", "-o", "{ranks}|{reason}")
        return dict(line.split("|", 1) for line in listed.splitlines() if line)


ACTIVE = """\
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: checked}
spec:
  size: 3
  interactive: true
  flux: {container: {disable: true}}
  containers: [{image: host}]
  health:
    checks:
      - {name: fabric, kind: active, command: 'date +%s.%N >>/tmp/ran', intervalSeconds: 2}
"""


@pytest.fixture(scope="module")
def kept(cluster: LocalCluster, needs_flux) -> Iterator[Kept]:
    with scratch_namespace(cluster) as (admin, namespace):
        yield Kept(cluster, admin, namespace)


def test_a_failing_check_drains_its_rank_until_it_passes(kept: Kept):
    done = kept.fluxhop("create", "--name", NAME, "-N", "3", *flux_image_flags(kept.cluster),
                        "--health-check", f"sick={SICK}", "--health-interval", "2",
                        timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    eventually("three brokers online", lambda: kept.online(NAME) == 3, timeout=120)
    assert "sched-fluxion-qmanager" in kept.flux("module", "list")
    kept.flux("resource", "drain", "2", "maintenance")  # an admin's
    kept.flux("exec", "-r", "1-2", "touch", "/tmp/sick")
    reason = "health: sick: a sick file"
    eventually("rank 1 drained by its check",
               lambda: kept.drains() == {"1": reason, "2": "maintenance"}, timeout=30)  # fmt: skip
    job = kept.flux("submit", "-N3", "true").strip()
    assert kept.flux("jobs", "-no", "{state}", job).strip() in ("DEPEND", "PRIORITY", "SCHED")

    def seen_in_status() -> bool:
        said = kept.checked("status", NAME)
        return ("1 passing, 2 failing (ranks 1-2: a sick file)" in said
                and "1 health, 0 autoscale, 1 other" in said)  # fmt: skip

    eventually("the checks' results in fluxhop status", seen_in_status, timeout=30)
    metrics = json.loads(kept.checked("status", NAME, "-o", "json"))["metrics"]
    assert metrics["health_checks"] == {"sick": {"pass": 1, "fail": 2}}
    kept.flux("exec", "-r", "1-2", "rm", "/tmp/sick")
    eventually("rank 1 undrained", lambda: "1" not in kept.drains(), timeout=30)

    def passing_on_rank_2() -> bool:
        result = kept.flux("exec", "-r", "2", "cat", RESULT)
        return result.startswith("0 ")

    eventually("rank 2's check passing again", passing_on_rank_2, timeout=30)
    for _ in range(2):  # the rounds after it: its decision made
        seen = kept.flux("exec", "-r", "2", "stat", "-c", "%Y", RESULT)
        eventually("another round on rank 2",
                   lambda seen=seen: kept.flux("exec", "-r", "2", "stat", "-c", "%Y", RESULT) != seen,
                   timeout=30)  # fmt: skip
    assert kept.drains() == {"2": "maintenance"}  # the admin's, untouched
    kept.flux("resource", "undrain", "2")
    kept.flux("job", "wait-event", "-t", "60", job, "clean")
    assert kept.flux("jobs", "-no", "{result}", job).strip() == "COMPLETED"
    status = json.loads(kept.checked("status", NAME, "-o", "json"))
    assert status["brokers"]["up"] == 3
    kept.checked("delete", NAME)


def test_an_active_check_never_runs_beside_a_users_job(kept: Kept, tmp_path: Path):
    spec = tmp_path / "checked.yaml"
    spec.write_text(yaml.safe_dump(placed_minicluster(kept.cluster, yaml.safe_load(ACTIVE))))
    done = kept.fluxhop("create", "-f", str(spec), timeout=240)
    assert done.returncode == 0, done.stderr
    eventually("three brokers online", lambda: kept.online("checked") == 3, timeout=120)

    def flux(*args: str) -> str:
        return kept.checked("proxy", "checked", "flux", *args)

    def runs(rank: int) -> list[float]:
        """When the active check ran in rank's pod (its own /tmp)."""
        ran = flux("exec", "-r", str(rank), "sh", "-c", "cat /tmp/ran 2>/dev/null || true")
        return [float(line) for line in ran.split()]

    # one core of rank 1's pod: the rest of its node is idle, but not for a check
    job = flux("submit", "-n1", "--requires=rank:1", "sleep", "300").strip()
    flux("job", "wait-event", "-t", "60", job, "start")
    started = float(flux("jobs", "-no", "{t_run}", job))
    eventually("ranks 0 and 2 checked twice while it runs",
               lambda: all(len([t for t in runs(r) if t > started]) >= 2 for r in (0, 2)),
               timeout=60)  # fmt: skip
    assert flux("jobs", "-no", "{state}", job).strip() == "RUN"
    flux("cancel", job)
    flux("job", "wait-event", "-t", "60", job, "clean")
    ended = float(flux("jobs", "-no", "{t_inactive}", job))
    assert not [t for t in runs(1) if started <= t <= ended]
    eventually("rank 1 checked once its job is done",
               lambda: [t for t in runs(1) if t > ended], timeout=60)  # fmt: skip
    assert set(flux("jobs", "-a", "-no", "{name} {urgency}").split("\n")) - {""} == {
        "fluxhop-health-fabric 1", "sleep 16"}  # fmt: skip
    kept.checked("delete", "checked")
