"""Benchmark CLI start-up (plain script; prints numbers and ratios).

    python bench/bench_startup.py

The median wall time of 21 runs each of ``python -c pass``, ``fluxhop
--version`` and ``fluxhop render -f examples/lammps.yaml``, and each as a
ratio to ``python -c pass`` (a ratio, because machines are noisy). The
commands take turns, one run of each per round, so that a busy spell on the
machine slows all of them alike rather than one of them.

A fourth line measures the floor under ``render``: a program that only imports
the libraries rendering stands on (click, PyYAML, cryptography's X25519 key
generation) and validates one pydantic model of one field. No ``fluxhop
render`` can start faster than that with these libraries; the distance
between the two lines is fluxhop's own cost (its models' classes and schemas,
the rendering, the output).

Goals (issue #34): ``--version`` at most 4x ``python -c pass``; ``render`` at
most 1.5x the floor under it.

The runs see bytecode caching as a user's Python has it: this machine sets
PYTHONDONTWRITEBYTECODE, which would make every run compile fluxhop's modules
from source again, so it is unset for them and a first run writes the caches.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLUXHOP = Path(sys.executable).parent / "fluxhop"
RUNS = 21
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "fluxhop --version": [str(FLUXHOP), "--version"],
    "fluxhop render -f examples/lammps.yaml": [
        str(FLUXHOP),
        "render",
        "-f",
        str(REPO / "examples" / "lammps.yaml"),
    ],
}
FLOOR = """
import click, yaml
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from pydantic import BaseModel
class One(BaseModel):
    field: int
One.model_validate({"field": 1})
X25519PrivateKey.generate()
"""
COMMANDS["floor under render (libraries only)"] = [sys.executable, "-c", FLOOR]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
PYTHON = "python -c pass"
RENDER = "fluxhop render -f examples/lammps.yaml"
FLOOR_NAME = "floor under render (libraries only)"
# command: (the command its ratio is taken to, the goal for that ratio)
GOALS = {"fluxhop --version": (PYTHON, 4.0), RENDER: (FLOOR_NAME, 1.5)}


def one_run(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start


def medians() -> dict[str, float]:
    for argv in COMMANDS.values():
        one_run(argv)  # caches: pages, bytecode
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(RUNS):
        for name, argv in COMMANDS.items():
            times[name].append(one_run(argv))
    return {name: statistics.median(runs) for name, runs in times.items()}


def main() -> int:
    median = medians()
    failed = 0
    print(f"{'command':<42} {'median':>9} {'/python':>8}   goal")
    for name, seconds in median.items():
        line = f"{name:<42} {seconds * 1000:7.1f}ms {seconds / median[PYTHON]:7.1f}x"
        if name in GOALS:
            base, goal = GOALS[name]
            ratio = seconds / median[base]
            met = ratio <= goal
            failed += not met
            of = "python" if base == PYTHON else "floor"
            line += f"   {ratio:.2f}x {of} (<= {goal:g}x {'ok' if met else 'MISSED'})"
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
