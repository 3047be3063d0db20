"""Benchmark spec.health's replace on the real test cluster (issue #37): from
a check failing on rank 1 to the rank drained, its pod replaced, the new
pod's broker in and the rank undrained, against a fresh MiniCluster's start.

    sudo .venv/bin/python bench/bench_health_replace.py [--runs 3] [--interval 2]

Needs root, the built cluster (python -m tests.realk8s.build) and a
flux-core with Fluxion (python -m tests.build). The cluster has two nodes;
fluxhop's operator runs beside it (deploy/'s ServiceAccount, looking every
second) on a MiniCluster resource of size 2 with one check every
``--interval`` seconds and ``onFailure: replace``. Each run makes the check
fail in rank 1's pod (a file in its /tmp), once that pod is past its grace
(the operator leaves a pod younger than its checks' first round), and times
from that moment, polling the API server every 50 ms:

* drained: the operator's status.health names rank 1 (the drain is Flux's,
  within an interval: bench/bench_health.py times that alone);
* replaced: the operator's Replaced event (node tainted, pod evicted);
* new pod running: the Job's new pod for rank 1 (on the other node);
* undrained: status.health names no rank (the new pod's check passed).

Each run's figures are printed too: the Job controller waits before it makes
a pod of an index again after one was lost (10 s, doubling with each loss
of that index, up to 10 min: fluxhop's Jobs count per index), and an evicted
pod is a lost one to it even where its podFailurePolicy ignores it, so each
replacement of rank 1 waits twice as long as the one before.

The yardstick is a fresh start: the resource created -> every rank's check
passing in status.health. Between runs the taint is lifted, as an admin
would once the node is fixed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_autoscale, beside it

from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.deployment import deploy
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.replacing import lift_unhealthy_taints, running_pod
from tests.realk8s.test_operator import Operator
from tests.realk8s.tools import command_env

import bench_autoscale  # this directory: the cluster it starts
from bench_autoscale import cli

NAME = "healthy"
RESOURCES = "/apis/flux-framework.org/v1alpha2/namespaces/{}/miniclusters"
SICK = 'test ! -e /tmp/sick || { echo "a sick file"; exit 1; }'
POLL = 0.05


def until(what: str, check: Callable[[], Any], timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(POLL)
    raise SystemExit(f"bench_health_replace: timed out waiting for {what}")


class Watched:
    def __init__(self, cluster: LocalCluster, api: Api, namespace: str) -> None:
        self.cluster, self.api, self.namespace = cluster, api, namespace
        self.path = f"{RESOURCES.format(namespace)}/{NAME}"

    def health(self) -> dict[str, Any]:
        return (self.api.get(self.path).get("status") or {}).get("health") or {}

    def passing(self, size: int) -> bool:
        return self.health().get("checks") == [{"name": "sick", "passing": size, "failing": 0}]

    def replaced(self) -> int:
        found = self.api.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        return sum(e["reason"] == "Replaced" for e in found)

    def rank1(self) -> dict[str, Any] | None:
        return running_pod(self.api, self.namespace, NAME, 1)

    def lift_taints(self) -> None:
        lift_unhealthy_taints(self.api)


def one_run(watched: Watched, env: dict[str, str], grace: float) -> dict[str, float]:
    pod = until("rank 1's pod running", watched.rank1)
    stamp = datetime.strptime(pod["status"]["startTime"], "%Y-%m-%dT%H:%M:%SZ")
    age = time.time() - stamp.replace(tzinfo=UTC).timestamp()
    if age < grace + 1:
        time.sleep(grace + 1 - age)
    before = watched.replaced()
    cli(env, "proxy", "--namespace", watched.namespace, NAME, "flux", "exec", "-r", "1",
        "touch", "/tmp/sick")  # fmt: skip
    start = time.monotonic()
    until("rank 1 drained", lambda: watched.health().get("drained"))
    drained = time.monotonic() - start
    until("the Replaced event", lambda: watched.replaced() > before)
    replaced = time.monotonic() - start
    old = pod["metadata"]["uid"]
    until("a new rank 1 running", lambda: (p := watched.rank1()) and p["metadata"]["uid"] != old)
    running = time.monotonic() - start
    until("rank 1 undrained", lambda: watched.health().get("drained") == [])
    undrained = time.monotonic() - start
    watched.lift_taints()
    return {"failing -> drained (status.health)": drained,
            "failing -> replaced (event)": replaced,
            "failing -> new pod running": running,
            "failing -> undrained (status.health)": undrained}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--interval", type=int, default=2)
    args = parser.parse_args()
    timeout = 5
    grace = args.interval + timeout + 10  # the operator's (operator/health_watch.py)
    cluster = bench_autoscale.started_cluster("bench_health_replace")
    operator = None
    try:
        env = command_env(cluster)
        config = deploy(cluster)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        log = Path(tempfile.mkdtemp(prefix="fh-bench-")) / "operator.log"
        with cluster.admin() as api:
            api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
            operator = Operator(cluster, config, namespace, log, "--health-interval", "1")
            check = {"name": "sick", "command": SICK, "intervalSeconds": args.interval,
                     "timeoutSeconds": timeout}  # fmt: skip
            doc = minicluster_doc(NAME, size=2, interactive=True, containers=[{"image": FLUX_IMAGE}],
                                  flux={"container": {"disable": True}},
                                  health={"onFailure": "replace", "checks": [check]})  # fmt: skip
            watched = Watched(cluster, api, namespace)
            start = time.monotonic()
            api.create(RESOURCES.format(namespace), doc)
            until("every rank's check passing", lambda: watched.passing(2))
            fresh = time.monotonic() - start
            runs = [one_run(watched, env, grace) for _ in range(args.runs)]
        print(f"spec.health replace on the real cluster: size 2, checks every {args.interval} s, "
              f"the operator looking every 1 s; median of {args.runs} (operator log {log}):")  # fmt: skip
        for key in runs[0]:
            values = [r[key] for r in runs]
            each = ", ".join(f"{v:.2f}" for v in values)
            print(f"  {key:<40} {statistics.median(values):7.2f} s  (runs: {each})")
        print(f"  {'fresh start: created -> every check passing':<40} {fresh:7.2f} s")
        back = statistics.median(r["failing -> undrained (status.health)"] for r in runs)
        gone = statistics.median(r["failing -> replaced (event)"] for r in runs)
        print(f"  replaced -> undrained / fresh start = {(back - gone) / fresh:.2f}")
    finally:
        if operator is not None:
            operator.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
