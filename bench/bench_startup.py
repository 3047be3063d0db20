"""Benchmark CLI start-up (plain script; prints numbers and ratios).

    python bench/bench_startup.py

The median wall time of 10 runs each of ``python -c pass``, ``fluxhop
--version`` and ``fluxhop render -f examples/lammps.yaml``, and each as a
ratio to ``python -c pass`` (a ratio, because machines are noisy).
Goals: --version <= 5x, render <= 15x.

A fourth line measures the floor under ``render``: a program that only imports
the libraries rendering stands on (click, PyYAML, cryptography's X25519 key
generation) and validates one pydantic model of one field. No ``fluxhop
render`` can start faster than that with these libraries; the distance
between the two lines is fluxhop's own cost (its models' classes and schemas,
the rendering, the output).

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
RUNS = 10
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
GOALS = {"fluxhop --version": 5.0, "fluxhop render -f examples/lammps.yaml": 15.0}


def median_seconds(argv: list[str]) -> float:
    subprocess.run(argv, check=True, capture_output=True, env=ENV)  # caches: pages, bytecode
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=ENV)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    medians = {name: median_seconds(argv) for name, argv in COMMANDS.items()}
    base = medians["python -c pass"]
    failed = 0
    print(f"{'command':<42} {'median':>9} {'ratio':>7} {'goal':>6}")
    for name, seconds in medians.items():
        ratio = seconds / base
        goal = GOALS.get(name)
        mark = "" if goal is None else (" ok" if ratio <= goal else " MISSED")
        failed += goal is not None and ratio > goal
        goal_text = f"<={goal:g}x" if goal else ""
        print(f"{name:<42} {seconds * 1000:7.1f}ms {ratio:6.1f}x {goal_text:>6}{mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
