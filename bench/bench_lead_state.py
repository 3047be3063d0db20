"""Benchmark spec.leadState on the real test cluster (issue #37): from rank
0's pod deleted to the instance accepting jobs again, against a fresh
MiniCluster's start.

    sudo .venv/bin/python bench/bench_lead_state.py [--runs 3]

Needs root, the built cluster (python -m tests.realk8s.build) and a
flux-core with Fluxion (python -m tests.build). An interactive MiniCluster of
size 2 keeps rank 0's state on the claim fluxhop makes (bound to a hostPath
PersistentVolume made beforehand: the test cluster's nodes share one host),
which deploy/lead-state.yaml's policy, applied first, mounts in rank 0's pod.

* fresh start (the yardstick): ``fluxhop create`` started -> a job on both
  nodes has run (``flux run -N2 true`` in rank 0, tried every 0.2 s);
* ``--workers-lost K``: first, rank 1's pod deleted K times (health's
  replace evicts it, a lost pod all the same to the Job controller), each
  time until both brokers are up again: a worker's loss
  must not make rank 0's later recovery slower;
* each run: one job running on both nodes and five waiting for them, then
  rank 0's pod deleted -> a new rank 0 running -> both brokers up (as
  ``fluxhop status`` says) -> the instance accepting jobs again (the same ``flux run -N2 true`` succeeds: the worker is back, the
  scheduler loaded) -> the five kept jobs done.

Each try is a ``fluxhop proxy`` (an exec into rank 0): both figures carry
its cost alike. Each run's figures are printed, since the Job controller's
wait before making a pod again after a failed one (10 s, doubling with each
failure since the last success) may grow from one run to the next.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_autoscale, beside it

from tests.realk8s.api import Api
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.replacing import running_pod
from tests.realk8s.test_lead_state import DOCUMENT, NAME, POLICY, policy_in_force
from tests.realk8s.tools import command_env, kubectl

import bench_autoscale  # this directory: the cluster it starts
from bench_health_replace import until


class Lasting:
    def __init__(self, env: dict[str, str], api: Api, namespace: str) -> None:
        self.env, self.api, self.namespace = env, api, namespace

    def fluxhop(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(bench_autoscale.FLUXHOP), args[0], "--namespace", self.namespace, *args[1:]]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=300)

    def flux(self, *args: str) -> str:
        done = self.fluxhop("proxy", NAME, "flux", *args)
        if done.returncode != 0:
            raise SystemExit(f"bench_lead_state: flux {' '.join(args)}: {done.stderr}")
        return done.stdout

    def takes_jobs(self) -> bool:
        return self.fluxhop("proxy", NAME, "flux", "run", "-N2", "true").returncode == 0

    def brokers_up(self) -> int:
        done = self.fluxhop("status", NAME, "-o", "json")
        return int(json.loads(done.stdout)["brokers"]["up"]) if done.returncode == 0 else 0

    def states(self, jobs: list[str]) -> list[str]:
        done = self.fluxhop("proxy", NAME, "flux", "jobs", "-no", "{state}", *jobs)
        return done.stdout.split() if done.returncode == 0 else []


def lose_pod(lasting: Lasting, rank: int) -> float:
    """Delete ``rank``'s running pod; once the Job's new one runs, the time
    taken, counted from the delete."""
    old = until(f"rank {rank} running",
                lambda: running_pod(lasting.api, lasting.namespace, NAME, rank))  # fmt: skip
    start = time.monotonic()
    lasting.api.delete(f"/api/v1/namespaces/{lasting.namespace}/pods/{old['metadata']['name']}")

    def replaced() -> bool:
        pod = running_pod(lasting.api, lasting.namespace, NAME, rank)
        return pod is not None and pod["metadata"]["uid"] != old["metadata"]["uid"]

    until(f"a new rank {rank} running", replaced)
    return time.monotonic() - start


def one_run(lasting: Lasting) -> dict[str, float]:
    running = lasting.flux("submit", "-N2", "--exclusive", "sleep", "600").strip()
    until("the job running", lambda: lasting.states([running]) == ["RUN"])
    pending = [lasting.flux("submit", "-N2", "true").strip() for _ in range(5)]
    pod = lose_pod(lasting, 0)
    start = time.monotonic() - pod  # the delete
    until("both brokers up", lambda: lasting.brokers_up() == 2)
    up = time.monotonic() - start
    until("the instance taking jobs", lasting.takes_jobs)
    back = time.monotonic() - start
    until("the five kept jobs done", lambda: lasting.states(pending) == ["INACTIVE"] * 5)
    done = time.monotonic() - start
    return {"deleted -> new rank 0 running": pod,
            "deleted -> both brokers up": up,
            "deleted -> taking jobs again": back,
            "deleted -> the five kept jobs done": done}  # fmt: skip


def lose_worker(lasting: Lasting) -> float:
    """Rank 1's pod deleted -> both brokers up again. (Health's replace
    evicts instead; to the Job controller's wait either is a lost pod.)"""
    start = time.monotonic() - lose_pod(lasting, 1)
    until("both brokers up", lambda: lasting.brokers_up() == 2)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers-lost", type=int, default=0,
                        help="lose rank 1's pod this many times before the runs")  # fmt: skip
    args = parser.parse_args()
    cluster = bench_autoscale.started_cluster("bench_lead_state")
    try:
        env = command_env(cluster)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        root = tempfile.mkdtemp(prefix="fh-lead-")
        with cluster.admin() as api:
            api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
            api.create("/api/v1/persistentvolumes", {
                "metadata": {"name": namespace},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": "", "hostPath": {"path": root, "type": "Directory"},
                         "claimRef": {"namespace": namespace, "name": f"{NAME}-lead-state"}}})  # fmt: skip
            kubectl(cluster, "apply", "-f", str(POLICY))
            until("the policy in force", lambda: policy_in_force(cluster, namespace))
            lasting = Lasting(env, api, namespace)
            document = Path(root).parent / f"{namespace}.yaml"
            document.write_text(
                yaml.safe_dump(placed_minicluster(cluster, yaml.safe_load(DOCUMENT)))
            )
            start = time.monotonic()
            created = lasting.fluxhop("create", "-f", str(document))
            if created.returncode != 0:
                raise SystemExit(f"bench_lead_state: create: {created.stderr}")
            until("the instance taking jobs", lasting.takes_jobs)
            fresh = time.monotonic() - start
            workers = [lose_worker(lasting) for _ in range(args.workers_lost)]
            runs = [one_run(lasting) for _ in range(args.runs)]
            api.delete(f"/api/v1/persistentvolumes/{namespace}")
        print(f"spec.leadState on the real cluster: size 2, one job running and five pending "
              f"when rank 0's pod is deleted; median of {args.runs}:")  # fmt: skip
        if workers:
            each = ", ".join(f"{w:.2f}" for w in workers)
            print(f"  before the runs, rank 1's pod deleted -> both brokers up: {each} s")
        for key in runs[0]:
            values = [r[key] for r in runs]
            each = ", ".join(f"{v:.2f}" for v in values)
            print(f"  {key:<36} {statistics.median(values):7.2f} s  (runs: {each})")
        print(f"  {'fresh start: create -> taking jobs':<36} {fresh:7.2f} s")
        back = statistics.median(r["deleted -> taking jobs again"] for r in runs)
        print(f"  recovery / fresh start = {back / fresh:.2f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
