"""Benchmark the Flux format codecs (plain script; prints numbers and ratios).

    python bench/bench_flux.py

Machines are noisy, so besides absolute times it prints ratios to the 1,000
host case: a linear codec shows a ratio near the size ratio (1,000 for
1,000,000 hosts, 10 for 10,000 nodes).
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from fluxhop.flux import hostlist
from fluxhop.flux.resources import ResourceSet


def best_of(func: Callable[[], object], repeat: int = 3) -> float:
    """Seconds of the fastest of ``repeat`` runs (timeit's repeat, one call each)."""
    return min(timeit.repeat(func, number=1, repeat=repeat))


def hosts(n: int) -> list[str]:
    return [f"flux-sample-{i}" for i in range(n)]


def scattered(n: int) -> list[str]:
    """Worst case for compression: every other index, so no runs join."""
    return [f"node{2 * i}" for i in range(n)]


def main() -> None:
    rows = []
    for label, make in (("contiguous", hosts), ("scattered", scattered)):
        small, big = make(1_000), make(1_000_000)
        small_text, big_text = hostlist.encode(small), hostlist.encode(big)
        enc_small = best_of(lambda s=small: hostlist.encode(s))
        enc_big = best_of(lambda b=big: hostlist.encode(b), repeat=1)
        dec_small = best_of(lambda t=small_text: hostlist.decode(t))
        dec_big = best_of(lambda t=big_text: hostlist.decode(t), repeat=1)
        rows.append((f"hostlist encode {label}", enc_small, enc_big))
        rows.append((f"hostlist decode {label}", dec_small, dec_big))
    print(f"{'operation':34} {'1,000 hosts':>12} {'1,000,000':>12} {'ratio':>8}")
    for name, small_t, big_t in rows:
        print(f"{name:34} {small_t * 1e3:10.2f}ms {big_t:11.3f}s {big_t / small_t:8.0f}")

    r_small = best_of(lambda: ResourceSet.from_nodes(hosts(1_000), cores=64, gpus=8).to_json())
    r_big = best_of(lambda: ResourceSet.from_nodes(hosts(10_000), cores=64, gpus=8).to_json())
    text = ResourceSet.from_nodes(hosts(10_000), cores=64, gpus=8).to_json()
    small_text = ResourceSet.from_nodes(hosts(1_000), cores=64, gpus=8).to_json()
    parse_small = best_of(lambda: ResourceSet.from_json(small_text))
    parse_big = best_of(lambda: ResourceSet.from_json(text))
    print()
    print(f"{'operation':34} {'1,000 nodes':>12} {'10,000':>12} {'ratio':>8}")
    print(
        f"{'R from_nodes + to_json':34} {r_small * 1e3:10.2f}ms {r_big * 1e3:10.2f}ms {r_big / r_small:8.1f}"
    )
    print(
        f"{'R from_json':34} {parse_small * 1e3:10.2f}ms {parse_big * 1e3:10.2f}ms {parse_big / parse_small:8.1f}"
    )
    print(f"R text for 10,000 nodes: {len(text)} bytes")


if __name__ == "__main__":
    main()
