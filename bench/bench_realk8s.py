"""Benchmark the real Kubernetes test cluster (plain script; prints numbers).

    sudo .venv/bin/python bench/bench_realk8s.py [--runs 3]

Needs root and the built cluster (python -m tests.realk8s.build); the run
part needs a flux-core (FLUXHOP_FLUX_PREFIX or flux on PATH).

1. Cluster up: its processes started and every node Ready, then the first
   pod bound by the scheduler, run by a kubelet and Succeeded - "a pod can
   be scheduled and run".
2. `fluxhop run -N 4 -- hostname` on it, split into: apply (fluxhop started
   -> its Job exists), every pod Running, rank 0's command started (its
   first line of output reaches fluxhop), exit.
3. The same run against the fake API server (served over HTTP, its pods
   simulated), and the ratio of the two.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.fixtures import write_kubeconfig
from tests.cluster.httpserve import HTTPFake
from tests.realflux import flux_prefix, missing_flux
from tests.realk8s.api import Api
from tests.realk8s.binaries import bin_dir
from tests.realk8s.cluster import LocalCluster, missing_cluster
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.placing import REAL_NODES
from tests.realk8s.tools import FLUXHOP, command_env, pod_manifest

QUIET = re.compile(r"^(<\d>|fluxhop: |flux-job: )")


def cluster_up(prefix: Path | None) -> tuple[LocalCluster, float, float]:
    cluster = LocalCluster(bin_dir() or Path(), REAL_NODES, flux_prefix=prefix)
    started = time.perf_counter()
    cluster.start()
    ready = time.perf_counter() - started
    with cluster.admin() as api:
        api.create("/api/v1/namespaces/default/pods", pod_manifest("first", ["true"]))
        while (
            api.get("/api/v1/namespaces/default/pods/first")["status"].get("phase") != "Succeeded"
        ):
            time.sleep(0.02)
    return cluster, ready, time.perf_counter() - started


class Phases:
    """When the Job appeared and all pods ran, seen through a watch."""

    def __init__(self, api: Api, namespace: str, size: int) -> None:
        self.api, self.namespace, self.size = api, namespace, size
        self.job: float | None = None
        self.running: float | None = None
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        version = self.api.get(path)["metadata"]["resourceVersion"]
        phases: dict[str, str] = {}
        for _, pod in self.api.watch(path, version, timeout=300):
            if self.job is None and pod.get("metadata", {}).get("ownerReferences"):
                self.job = time.perf_counter()  # its first pod: the Job exists
            name = pod.get("metadata", {}).get("name")
            if name:
                phases[name] = pod.get("status", {}).get("phase", "")
            if sum(p == "Running" for p in phases.values()) >= self.size and self.running is None:
                self.running = time.perf_counter()
                return


def real_run(cluster: LocalCluster, nodes: int) -> dict[str, float]:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    with cluster.admin() as api, cluster.admin() as watcher:
        api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        phases = Phases(watcher, namespace, nodes)
        argv = [str(FLUXHOP), "run", "--namespace", namespace, "--flux-in-image", "--image", FLUX_IMAGE,
                "-N", str(nodes), "--", "hostname"]  # fmt: skip
        started = time.perf_counter()
        process = subprocess.Popen(argv, env=command_env(cluster), stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        command = None
        assert process.stdout is not None
        for line in process.stdout:
            if command is None and not QUIET.match(line):
                command = time.perf_counter()
        process.wait()
        ended = time.perf_counter()
        phases.thread.join(5)
        api.delete(f"/api/v1/namespaces/{namespace}")
    if process.returncode != 0 or None in (command, phases.job, phases.running):
        raise SystemExit(f"fluxhop run failed ({process.returncode}) or a phase went unseen")
    assert command is not None and phases.job is not None and phases.running is not None
    return {
        "apply": phases.job - started,
        "pods running": phases.running - phases.job,
        "command started": command - phases.running,
        "exit": ended - command,
        "total": ended - started,
    }


def fake_run(nodes: int) -> float:
    fake = FakeAPIServer()
    with HTTPFake(fake) as url, tempfile.TemporaryDirectory() as tmp:
        config = write_kubeconfig(Path(tmp) / "kubeconfig")
        config.write_text(config.read_text().replace("https://fake.invalid:6443", url))
        argv = [str(FLUXHOP), "run", "--image", "host", "-N", str(nodes), "--", "hostname"]
        started = time.perf_counter()
        subprocess.run(
            argv, env={**os.environ, "KUBECONFIG": str(config)}, capture_output=True, check=True
        )
        elapsed = time.perf_counter() - started
    fake.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=4)
    args = parser.parse_args()
    reason = missing_cluster()
    if reason:
        raise SystemExit(f"bench_realk8s: {reason}")
    prefix = flux_prefix() if missing_flux() is None else None
    cluster, ready, first_pod = cluster_up(prefix)
    try:
        print(
            f"cluster up: nodes Ready in {ready:.2f} s; a first pod Succeeded at {first_pod:.2f} s"
        )
        if prefix is None:
            print(f"fluxhop run: skipped ({missing_flux()})")
            return
        runs = [real_run(cluster, args.nodes) for _ in range(args.runs)]
        print(
            f"fluxhop run -N {args.nodes} -- hostname on the real cluster (median of {args.runs}):"
        )
        for phase in runs[0]:
            print(f"  {phase:<16} {statistics.median(r[phase] for r in runs):6.2f} s")
        fake = statistics.median(fake_run(args.nodes) for _ in range(args.runs))
        real = statistics.median(r["total"] for r in runs)
        print(f"the same run on the fake API server: {fake:.2f} s; real / fake = {real / fake:.1f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
