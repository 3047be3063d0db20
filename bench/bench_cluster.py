"""Benchmark cluster operations against the fake API server (plain script).

    python bench/bench_cluster.py [--count 1000]

Prints requests per create and per delete, and the wall time per MiniCluster
when creating 10 and N MiniClusters in a row (the fake validates every write
against the real schemas, as a cluster would). A constant per-MiniCluster time
means create cost does not grow with the number of MiniClusters.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.fixtures import write_kubeconfig

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.spec.flags import minicluster_from_flags


def create_many(count: int, config: Path) -> tuple[float, FakeAPIServer]:
    fake = FakeAPIServer(controllers=False)
    ops = MiniClusters(Kube.connect(str(config), transport=fake.transport()))
    specs = [
        minicluster_from_flags(["true"], image="ubuntu", nodes=4, name=f"bench-{i}")
        for i in range(count)
    ]
    start = time.perf_counter()
    for spec in specs:
        ops.create(spec)
    elapsed = time.perf_counter() - start
    ops.kube.close()
    return elapsed, fake


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = write_kubeconfig(Path(tmp) / "kubeconfig")
        fake = FakeAPIServer(controllers=False)
        ops = MiniClusters(Kube.connect(str(config), transport=fake.transport()))
        root = ops.create(minicluster_from_flags(["true"], image="ubuntu", nodes=4, name="one"))
        creates = fake.seen()
        fake.requests.clear()
        ops.delete_root(root)
        deletes = fake.seen()
        print(f"requests per create: {len(creates)} ({', '.join(creates)})")
        print(f"requests per delete: {len(deletes)} ({', '.join(deletes)})")
        small, _ = create_many(10, config)
        large, _ = create_many(args.count, config)
    per_small, per_large = small / 10, large / args.count
    print(f"create 10 MiniClusters:    {small:8.2f}s  ({per_small * 1e3:.1f} ms each)")
    print(f"create {args.count} MiniClusters: {large:8.2f}s  ({per_large * 1e3:.1f} ms each)")
    print(f"time per MiniCluster at {args.count} / at 10 = {per_large / per_small:.2f}")


if __name__ == "__main__":
    main()
