"""Benchmark the operator's reconcile against the fake API server (plain script).

    python bench/bench_operator.py [--count 100]

Prints the requests (and writes) one reconcile makes for a new MiniCluster
resource, for a no-op resync of an unchanged one (the goal: no write at all),
and for a size change; and the time per reconcile over --count resources.
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
from fluxhop.operator.reconcile import Reconciler
from fluxhop.operator.resource import FIELD_MANAGER

WRITES = ("APPLY", "PATCH", "POST", "DELETE")


def resource(name: str, size: int = 4) -> dict:
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "size": size,
            "maxSize": 8,
            "interactive": True,
            "containers": [{"image": "ubuntu"}],
        },
    }


def counted(fake: FakeAPIServer, action) -> tuple[int, int]:
    before = len(fake.requests)
    action()
    made = fake.requests[before:]
    return len(made), sum(1 for r in made if r.verb in WRITES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = write_kubeconfig(Path(tmp) / "kubeconfig")
        fake = FakeAPIServer(controllers=False)
        fake.flux_operator = False
        kube = Kube.connect(str(config), transport=fake.transport(), field_manager=FIELD_MANAGER)
        reconciler = Reconciler(MiniClusters(kube))
        kube.apply(resource("one"))
        first = counted(fake, lambda: reconciler.reconcile(fake.get("MiniCluster", "one")))
        resync = counted(fake, lambda: reconciler.reconcile(fake.get("MiniCluster", "one")))
        kube.merge_patch("MiniCluster", "one", {"spec": {"size": 6}})
        scale = counted(fake, lambda: reconciler.reconcile(fake.get("MiniCluster", "one")))
        for i in range(args.count):
            kube.apply(resource(f"m-{i}"))
        start = time.perf_counter()
        for i in range(args.count):
            reconciler.reconcile(fake.get("MiniCluster", f"m-{i}"))
        per_create = (time.perf_counter() - start) / args.count
        start = time.perf_counter()
        for i in range(args.count):
            reconciler.reconcile(fake.get("MiniCluster", f"m-{i}"))
        per_resync = (time.perf_counter() - start) / args.count
        kube.close()
        fake.close()
    print(f"reconcile of a new MiniCluster:    {first[0]} requests, {first[1]} writes")
    print(
        f"no-op resync of an unchanged one:  {resync[0]} requests, {resync[1]} writes (goal: 0 writes)"
    )
    print(f"a size change within maxSize:      {scale[0]} requests, {scale[1]} writes")
    print(
        f"time per reconcile over {args.count}: create {per_create * 1000:.1f} ms, resync {per_resync * 1000:.1f} ms"
    )
    print(f"ratio resync / create: {per_resync / per_create:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
