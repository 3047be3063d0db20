"""Benchmark MultiKueue dispatch of a MiniCluster resource (issue #38): from
its creation on the manager to running on the worker to its exit seen on the
manager, for sizes 2 and 8, against the same queued MiniCluster created on
the worker directly.

    sudo .venv/bin/python bench/bench_multikueue.py [--runs 3]

Needs root, the built cluster (python -m tests.realk8s.build) and a
flux-core with Fluxion (python -m tests.build). The worker is the test
cluster (two nodes), with the real JobSet and Kueue controllers and
``fluxhop operator``; the manager is tests/realk8s/multikueue.py's (a control
plane, the real Kueue with MultiKueue, ``fluxhop operator`` making the
Workloads). Each MiniCluster runs ``true`` on brokers of 100m CPU, queued on
a LocalQueue ``lq`` of the same name on both. Times are from the create
request's return, polled every 0.1 s:

* running: rank 0's command started (condition Running, on the worker);
* exit seen: condition Succeeded on the cluster it was created on (for a
  dispatched one: MultiKueue's copy of the worker's status on the manager).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_autoscale, beside it

from tests.realk8s.api import Api
from tests.realk8s.controllers import CONTROLLERS, Running
from tests.realk8s.deployment import deploy
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.multikueue import manager_of, queues_on_both
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.queues import QUEUE_LABEL
from tests.realk8s.test_operator import Operator

import bench_autoscale  # this directory: the cluster it starts

MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def minicluster(name: str, size: int, *, dispatched: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"size": size, "flux": {"container": {"disable": True}},
                            "containers": [{"image": FLUX_IMAGE, "command": "true",
                                            "resources": {"requests": {"cpu": "100m"}}}]}  # fmt: skip
    if dispatched:
        spec["managedBy"] = MULTIKUEUE
    return {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: "lq"}}, "spec": spec}  # fmt: skip


def _true(api: Api, path: str, kind: str) -> bool:
    found = api.find(path)
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def one(created_on: Api, worker: Api, namespace: str, size: int, *,
        dispatched: bool) -> dict[str, float]:  # fmt: skip
    name = f"b{size}-{uuid.uuid4().hex[:5]}"
    path = f"{MINICLUSTERS.format(namespace)}/{name}"
    created_on.create(
        MINICLUSTERS.format(namespace), minicluster(name, size, dispatched=dispatched)
    )
    start = time.monotonic()
    running = ended = None
    while ended is None:
        if time.monotonic() - start > 600:
            raise SystemExit(f"bench_multikueue: {name} did not end in 10 min")
        now = time.monotonic() - start
        if running is None and (_true(worker, path, "Running") or _true(worker, path, "Succeeded")):
            running = now
        if _true(created_on, path, "Succeeded"):
            ended = now
        time.sleep(0.1)
    created_on.delete(path)
    return {"running on the worker": running if running is not None else ended, "exit seen": ended}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cluster = bench_autoscale.started_cluster("bench_multikueue")
    with ExitStack() as stack:
        stack.callback(cluster.stop)
        for name in ("jobset", "kueue"):
            running = Running(cluster, CONTROLLERS[name])
            stack.callback(running.stop)
            running.start()
        operator_kubeconfig = deploy(cluster)
        manager = stack.enter_context(manager_of(cluster))
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        worker = stack.enter_context(cluster.admin())
        worker.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        stack.enter_context(queues_on_both(manager, worker, namespace, "lq", {"cpu": "2"}))
        logs = Path(f"/tmp/{namespace}")
        logs.mkdir()
        for where, (on, kubeconfig) in {"manager": (manager.cluster, manager.operator_kubeconfig),
                                        "worker": (cluster, operator_kubeconfig)}.items():  # fmt: skip
            operator = Operator(on, kubeconfig, namespace, logs / f"{where}.log")
            stack.callback(operator.stop)
        api = stack.enter_context(manager.admin())
        print(f"MultiKueue dispatch vs. created on the worker (median of {args.runs}, seconds):")
        for size in (2, 8):
            direct = [
                one(worker, worker, namespace, size, dispatched=False) for _ in range(args.runs)
            ]
            far = [one(api, worker, namespace, size, dispatched=True) for _ in range(args.runs)]
            for key in direct[0]:
                near = statistics.median(r[key] for r in direct)
                there = statistics.median(r[key] for r in far)
                print(f"  size {size}: create -> {key:<22} direct {near:6.2f}  dispatched "
                      f"{there:6.2f}  (+{there - near:.2f})")  # fmt: skip
            print(f"    runs: direct {[round(r['exit seen'], 2) for r in direct]}, dispatched "
                  f"{[round(r['exit seen'], 2) for r in far]}")  # fmt: skip


if __name__ == "__main__":
    main()
