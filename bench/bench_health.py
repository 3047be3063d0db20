"""Benchmark spec.health (issue #37): from a check failing on one rank to
that rank drained, and from the check passing again to the rank undrained.

    python bench/bench_health.py [--size 4] [--interval 5] [--rounds 6]

Where a real flux-core is on PATH (or built by ``python -m tests.build``):
runs a local MiniCluster of ``--size`` brokers (the same runner as in the
pods, render/templates/health.sh) with two checks every ``--interval``
seconds, a passive one and an active one (a Flux job on the idle nodes),
each failing on a rank while a file of that rank's exists. Each round flips
the file of one rank (1, 2, ... in turn) at a moment that falls anywhere in
the check's interval, and times, by polling ``flux resource drain`` every
20 ms:

* passive: failing -> drained, and passing again -> undrained;
* active: failing -> drained (its drain then stands until someone lifts it:
  the bench undrains the rank itself, as an admin would, and waits until the
  active check passes there again).

It prints p50 and max of each, in seconds and in intervals. The goal is
detection within one interval: a check runs once an interval, so a failure
that comes just after a run is seen at the next one; the rest is the
runner's settle (one ``flux resource drain``) and, for an active check, its
job's scheduling. Without flux it says so and exits 0.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fluxhop.local.instance import LocalInstance
from fluxhop.spec.minicluster import MiniCluster

POLL = 0.02  # seconds between looks at the drains


def spec(size: int, interval: int, sick_dir: str) -> MiniCluster:
    passive = f'test ! -e "{sick_dir}/passive-$(flux getattr rank)" || {{ echo sick; exit 1; }}'
    active = f'test ! -e "{sick_dir}/active-$(flux getattr rank)" || {{ echo sick; exit 1; }}'
    checks = [
        {"name": "passive", "command": passive, "intervalSeconds": interval},
        {"name": "active", "kind": "active", "command": active, "intervalSeconds": interval},
    ]
    return MiniCluster.from_dict({
        "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
        "metadata": {"name": "bench-health"},
        "spec": {"size": size, "interactive": True, "containers": [{"image": "local"}],
                 "health": {"checks": checks}},
    })  # fmt: skip


class Bench:
    def __init__(self, instance: LocalInstance, flux: str, sick_dir: Path) -> None:
        self.instance = instance
        self.flux_bin = flux
        self.sick_dir = sick_dir

    def flux(self, *args: str) -> str:
        env = {**os.environ, "FLUX_URI": self.instance.uri}
        done = subprocess.run([self.flux_bin, *args], env=env, capture_output=True, text=True,
                              check=True, timeout=60)  # fmt: skip
        return done.stdout

    def drained(self) -> dict[str, str]:
        listed = self.flux("resource", "drain", "-n", "-o", "{ranks}|{reason}")
        return dict(line.split("|", 1) for line in listed.splitlines() if line)

    def until(self, what: str, holds: Callable[[], bool], start: float, timeout: float) -> float:
        """Seconds from ``start`` until ``holds()``."""
        while not holds():
            if time.monotonic() - start > timeout:
                raise SystemExit(f"bench_health: timed out waiting for {what}")
            time.sleep(POLL)
        return time.monotonic() - start

    def passive_round(self, rank: int, timeout: float) -> tuple[float, float]:
        sick = self.sick_dir / f"passive-{rank}"
        start = time.monotonic()
        sick.touch()
        drained = self.until("the drain", lambda: str(rank) in self.drained(), start, timeout)
        start = time.monotonic()
        sick.unlink()
        undrained = self.until("the undrain", lambda: str(rank) not in self.drained(), start,
                               timeout)  # fmt: skip
        return drained, undrained

    def active_round(self, rank: int, timeout: float) -> float:
        sick = self.sick_dir / f"active-{rank}"
        start = time.monotonic()
        sick.touch()
        drained = self.until("the drain", lambda: str(rank) in self.drained(), start, timeout)
        sick.unlink()
        self.flux("resource", "undrain", str(rank))  # the admin's judgement
        result = Path(self.instance.layout.flux_root(rank)) / "run" / "health" / "active"  # type: ignore[union-attr]
        self.until("the active check passing again",
                   lambda: result.exists() and result.read_text().startswith("0 "),
                   time.monotonic(), timeout)  # fmt: skip
        return drained


def summary(name: str, values: list[float], interval: int) -> str:
    p50, most = statistics.median(values), max(values)
    return (f"{name:<28} p50 {p50:6.2f} s ({p50 / interval:4.2f} intervals)   "
            f"max {most:6.2f} s ({most / interval:4.2f} intervals)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--interval", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    from tests.realflux import flux_prefix, flux_version

    prefix = flux_prefix()
    if prefix is None:
        print("bench_health: no flux-core on PATH; nothing to measure (python -m tests.build)")
        return 0
    os.environ["PATH"] = f"{prefix}/bin{os.pathsep}{os.environ['PATH']}"
    flux = shutil.which("flux")
    assert flux is not None
    state = tempfile.mkdtemp(prefix="fh-", dir="/tmp")
    os.environ["TMPDIR"] = state
    sick_dir = Path(state, "sick")
    sick_dir.mkdir()
    instance = LocalInstance(spec(args.size, args.interval, str(sick_dir)), stdout=io.StringIO(),
                             stderr=io.StringIO(), join_timeout=120)  # fmt: skip
    instance.start()
    try:
        instance.wait_running()
        bench = Bench(instance, flux, sick_dir)
        modules = bench.flux("module", "list")
        scheduler = "Fluxion" if "sched-fluxion-qmanager" in modules else "sched-simple"
        version = ".".join(map(str, flux_version() or ()))
        print(f"flux-core {version}, {scheduler}; {args.size} brokers; checks every "
              f"{args.interval} s; {args.rounds} rounds each")  # fmt: skip
        timeout = 10 * args.interval + 60
        drains, undrains, active = [], [], []
        for n in range(args.rounds):
            rank = 1 + n % (args.size - 1)
            time.sleep(random.uniform(0, args.interval))  # anywhere in the interval
            drained, undrained = bench.passive_round(rank, timeout)
            drains.append(drained)
            undrains.append(undrained)
            time.sleep(random.uniform(0, args.interval))
            active.append(bench.active_round(rank, timeout))
        print(summary("passive: failing -> drained", drains, args.interval))
        print(summary("passive: passing -> undrained", undrains, args.interval))
        print(summary("active: failing -> drained", active, args.interval))
    finally:
        instance.stop()
        shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
