"""Benchmark rendering (plain script; prints numbers and ratios).

    python bench/bench_render.py

Render time and bundle size for MiniClusters of 1, 100 and 10,000 nodes.
Goals: time(10,000) / time(1) <= 1.5, ConfigMap at 10,000 nodes <= 16 KiB.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.output import dump_yaml
from fluxhop.spec.flags import minicluster_from_flags

CERT = CurveCert.generate("bench")
SIZES = (1, 100, 10_000)


def best_of(func: Callable[[], object], repeat: int = 7) -> float:
    """Seconds of the fastest of ``repeat`` runs (timeit's repeat, one call each)."""
    return min(timeit.repeat(func, number=1, repeat=repeat))


def main() -> None:
    results = {}
    for nodes in SIZES:
        spec = minicluster_from_flags(
            ["lmp", "-in", "in.reaxc"], image="lammps", nodes=nodes, cores_per_task=4, name="bench"
        )
        seconds = best_of(lambda s=spec: render(s, cert=CERT))
        objects = render(spec, cert=CERT)
        config = next(o for o in objects if o["kind"] == "ConfigMap")
        config_bytes = sum(len(v.encode()) for v in config["data"].values())
        results[nodes] = (seconds, config_bytes, len(dump_yaml(objects).encode()))
    print(f"{'nodes':>7} {'render':>10} {'ConfigMap':>11} {'all YAML':>10}")
    for nodes, (seconds, config_bytes, total) in results.items():
        print(f"{nodes:>7} {seconds * 1e3:8.2f}ms {config_bytes:9d} B {total:8d} B")
    ratio = results[10_000][0] / results[1][0]
    print(f"time(10,000) / time(1) = {ratio:.2f} (goal <= 1.5)")
    print(f"ConfigMap at 10,000 nodes = {results[10_000][1] / 1024:.1f} KiB (goal <= 16 KiB)")


if __name__ == "__main__":
    main()
