"""Benchmark the local backend against Flux's own test instance (plain script).

    python bench/bench_local.py [--repeat 3]

Where a real flux-core is on PATH, times start-to-finish of ``flux run -N4
true`` on 4 brokers two ways in the same run: fluxhop's local backend (real
config boot over TCP on 127.0.0.1, CURVE, one process tree per rank) and
``flux start --test-size=4`` (Flux's in-process test bootstrap), and prints
the ratio. Without flux it says so and exits 0.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from fluxhop.local.instance import LocalInstance
from fluxhop.spec.flags import minicluster_from_flags


def time_fluxhop() -> float:
    spec = minicluster_from_flags(["true"], image="local", nodes=4, tasks=4, name="bench")
    with tempfile.TemporaryDirectory(prefix="fh-", dir="/tmp") as workdir:
        start = time.perf_counter()
        code = LocalInstance(
            spec, workdir=workdir, stdout=io.StringIO(), stderr=io.StringIO()
        ).run()
        elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"fluxhop local run failed with {code}")
    return elapsed


def time_test_size(flux: str) -> float:
    start = time.perf_counter()
    subprocess.run([flux, "start", "--test-size=4", "flux", "run", "-N4", "true"], check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    flux = shutil.which("flux")
    if flux is None:
        print("bench_local: no flux-core on PATH; nothing to measure (install flux-core to run it)")
        return 0
    ours = statistics.median(time_fluxhop() for _ in range(args.repeat))
    theirs = statistics.median(time_test_size(flux) for _ in range(args.repeat))
    print(f"fluxhop --local, 4 brokers, flux run -N4 true: {ours:.2f} s (median of {args.repeat})")
    print(f"flux start --test-size=4, same job:          {theirs:.2f} s (median of {args.repeat})")
    print(f"ratio fluxhop/test-size: {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
