"""Benchmark the operator's autoscaling on the real test cluster (plain script; prints numbers).

    sudo .venv/bin/python bench/bench_operator_autoscale.py [--runs 5] [--interval 0.2]

Needs root, the built cluster (python -m tests.realk8s.build) and a
flux-core (FLUXHOP_FLUX_PREFIX or flux on PATH). fluxhop's operator runs in
this process (kopf, standalone) on a MiniCluster resource of size 1 and
maxSize 2 with ``spec.autoscale``. Each run submits a job that fits (1
node), then one that needs 2 nodes, and waits - nothing steps the operator -
until both have run and the MiniCluster is back to 1. The times come from
the clocks of what happened, not from polling: Flux's job eventlogs (submit,
priority, start), the operator's resize (the patch of spec.size, timed in
this process) and Flux's resource eventlog (the new broker online):

* submit -> running, for a job that fits and for one that needs growth;
  the latter split into Flux making it pending (ingest, validation,
  priority), the operator's reaction (pending -> resize: the exporter's
  long poll answering, one GET, the decision, the patch), the new broker's
  join (resize -> online: the reconcile, the Job controller, the kubelet,
  the broker) and Flux scheduling it;
* growth adds: the difference of the two submit -> running.

Goal (issue #24): growth adds no more than a broker's join (the printed
ratio at most 1). It also counts the operator's API requests per look:
HTTP requests its autoscaling sends and execs into rank 0 (each exec is one
request), for looks that change nothing and for those that act (the
reconcile the resize triggers is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_autoscale, beside it

import httpx2
import kopf
from tests.documents import minicluster_doc
from tests.realk8s.deployment import deploy
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.tools import InNamespace, command_env

import bench_autoscale  # this directory: its fluxhop command and its wait
from bench_autoscale import cli
from fluxhop.cluster import inside as cluster_inside
from fluxhop.cluster.api import Kube
from fluxhop.operator import autoscale_timer, handlers, timers
from fluxhop.operator.resource import FIELD_MANAGER

NAME = "grow"
LOG = "/tmp/fluxhop-bench-operator.log"  # the operator's log, for when a run stalls
REPO = Path(__file__).resolve().parents[1]
RESOURCES = "/apis/flux-framework.org/v1alpha2/namespaces/{}/miniclusters"


def what_request(request: httpx2.Request) -> str:
    """ "PATCH miniclusters/status", "GET pods/exec" ...: the verb and the resource."""
    parts = request.url.path.strip("/").split("/")
    resource = parts[parts.index("namespaces") + 2] if "namespaces" in parts else parts[-1]
    tail = parts[parts.index("namespaces") + 4 :] if "namespaces" in parts else []
    return " ".join([request.method, "/".join([resource, *tail])])


class Counting:
    """Requests of the operator's autoscaling looks, by what the look did."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.looks: list[tuple[str, int]] = []  # (what it did, requests)
        self.resized: list[float] = []  # wall clock of each resize patch
        self.answered: list[float] = []  # wall clock of each answer of rank 0's exporter
        self.sent: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}  # by idle

    @contextlib.contextmanager
    def installed(self):
        send, look, execute = httpx2.Client.send, timers.on_autoscale, cluster_inside.pod_exec
        resize, waited = autoscale_timer.Operated.resize, timers.waited

        def counted_send(client, request, *args, **kwargs):
            api = request.url.path.startswith(("/api/", "/apis/"))  # not rank 0's exporter
            if api and getattr(self.local, "count", None) is not None:
                self.local.count += 1
                self.local.sent.append(what_request(request))
            return send(client, request, *args, **kwargs)

        def timed_wait(*args, **kwargs):
            found = waited(*args, **kwargs)
            self.answered.append(time.time())
            return found

        def counted_exec(*args, **kwargs):
            if getattr(self.local, "count", None) is not None:
                self.local.count += 1  # the exec's WebSocket upgrade is one request
                self.local.did.add("drain/undrain")
            return execute(*args, **kwargs)

        def timed_resize(instance, size):
            self.resized.append(time.time())
            self.local.did.add("resize")
            return resize(instance, size)

        def counted_look(*args, **kwargs):
            self.local.count, self.local.did, self.local.sent = 0, set(), []
            try:
                return look(*args, **kwargs)
            finally:
                did = "+".join(sorted(self.local.did)) or "nothing"
                self.looks.append((did, self.local.count))
                self.sent[did == "nothing"].update(self.local.sent)
                self.local.count = None

        with (
            mock.patch.object(httpx2.Client, "send", counted_send),
            mock.patch.object(cluster_inside, "pod_exec", counted_exec),
            mock.patch.object(autoscale_timer.Operated, "resize", timed_resize),
            mock.patch.object(timers, "on_autoscale", counted_look),
            mock.patch.object(timers, "waited", timed_wait),
        ):
            yield self


def run_operator(
    namespace: str, kubeconfig: str, interval: float
) -> tuple[threading.Event, threading.Thread]:
    os.environ["KUBECONFIG"] = kubeconfig  # kopf's own login reads it; set after kopf's
    kopf.on.login()(kopf.login_with_kubeconfig)  # import, so it must be asked for
    handlers.connect = lambda ns: Kube.connect(
        kubeconfig, namespace=ns, field_manager=FIELD_MANAGER
    )
    handlers.standalone = True  # one operator, no peering (as --standalone)
    timers.register_autoscaling(interval)
    logging.basicConfig(filename=LOG, level=logging.INFO, force=True)  # kopf's and ours
    stop, ready = threading.Event(), threading.Event()

    def main() -> None:
        asyncio.run(kopf.operator(namespaces=[namespace], standalone=True, stop_flag=stop,
                                  ready_flag=ready))  # fmt: skip

    thread = threading.Thread(target=main, name="operator", daemon=True)
    thread.start()
    if not ready.wait(120):
        raise SystemExit("the operator did not start")
    return stop, thread


def until(check, what: str, timeout: float = 300) -> None:
    try:
        bench_autoscale.until(check, what, timeout)
    except SystemExit as stop:
        raise SystemExit(f"{stop} (the operator's log: {LOG})") from None


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def one_run(
    namespace: str,
    env: dict[str, str],
    counting: Counting,
    size: Callable[[], int],
    online: Callable[[], int],
) -> dict[str, float]:
    ns = ["--namespace", namespace]

    def flux(*args: str) -> str:
        return cli(env, "proxy", *ns, NAME, "flux", *args)

    def timeline(jobid: str) -> dict[str, float]:
        until(lambda: flux("jobs", "-no", "{state}", jobid).strip() == "INACTIVE", "a job done")
        said = events(flux("job", "eventlog", "-f", "json", jobid))
        return {e["name"]: e["timestamp"] for e in said}

    fits = timeline(cli(env, "submit", NAME, *ns, "-N", "1", "--", "true").strip())
    looks_before, resizes_before = len(counting.looks), len(counting.resized)
    jobid = cli(env, "submit", NAME, *ns, "-N", "2", "--", "true").strip()
    job = timeline(jobid)
    resized = counting.resized[resizes_before]  # the growth (the shrink may follow soon)
    joined = [e["timestamp"] for e in events(flux("resource", "eventlog", "-f", "json"))
              if e["name"] == "online" and e["timestamp"] > resized]  # fmt: skip
    # shrunk: asked for 1 and rank 1's broker gone (a drained rank is not "online"
    # in flux resource status, so that alone would not say the shrink happened)
    until(lambda: size() == 1 and online() == 1, "back to one broker")
    acted = [n for did, n in counting.looks[looks_before:] if did != "nothing"]
    return {
        "submit -> running, a job that fits": fits["start"] - fits["submit"],
        "submit -> running, one that grows": job["start"] - job["submit"],
        "  submit -> pending (Flux)": job["priority"] - job["submit"],
        "  pending -> resize (operator)": resized - job["priority"],
        "    pending -> rank 0 answered": max(
            [t for t in counting.answered if t < resized] or [resized]
        )
        - job["priority"],
        "  broker join (resize -> online)": joined[0] - resized,
        "  online -> running (Flux)": job["start"] - joined[0],
        "growth adds (grows - fits)": (job["start"] - job["submit"])
        - (fits["start"] - fits["submit"]),
        "requests per acting look": statistics.mean(acted) if acted else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.2, help="--autoscale-interval")
    args = parser.parse_args()
    cluster = bench_autoscale.started_cluster("bench_operator_autoscale")
    stop = None
    try:
        env = command_env(cluster)
        # deploy/ but the Deployment: the operator runs here with its ServiceAccount's token
        operator_config = deploy(cluster)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        with cluster.admin() as api:
            api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
            counting = Counting()
            with counting.installed():
                stop, _ = run_operator(namespace, str(operator_config), args.interval)
                doc = minicluster_doc(NAME, size=1, maxSize=2, interactive=True,
                                      autoscale={"scaleDownDelaySeconds": 1},
                                      flux={"container": {"disable": True}},
                                      containers=[{"image": FLUX_IMAGE}])  # fmt: skip
                api.create(RESOURCES.format(namespace), doc)
                here = InNamespace(cluster, api, namespace)  # fluxhop status, as the tests read it
                until(lambda: here.online(NAME) == 1, "rank 0 online")

                def size() -> int:
                    return int(api.get(f"{RESOURCES.format(namespace)}/{NAME}")["spec"]["size"])

                runs = [one_run(namespace, env, counting, size, lambda: here.online(NAME))
                        for _ in range(args.runs)]  # fmt: skip
        idle = [n for did, n in counting.looks if did == "nothing"]
        print(f"the operator autoscaling a MiniCluster 1 -> 2 for a 2-node job "
              f"(looks every {args.interval:g}s, median of {args.runs}):")  # fmt: skip
        for key in runs[0]:
            value = statistics.median(r[key] for r in runs)
            print(f"  {key:<40} {value:8.2f}" + ("" if "requests" in key else " s"))
        print(f"  requests per look that acts on nothing {statistics.mean(idle):.2f} "
              f"({len(idle)} looks)")  # fmt: skip
        kinds = Counter(did for did, _ in counting.looks)
        print(f"  looks: {dict(kinds)}")
        for idle_, title in ((False, "acting"), (True, "acting on nothing")):
            print(f"  requests of the looks {title}: {dict(counting.sent[idle_])}")
        added = statistics.median(r["growth adds (grows - fits)"] for r in runs)
        join = statistics.median(r["  broker join (resize -> online)"] for r in runs)
        print(f"  growth adds / broker join = {added / join:.2f}  (goal: at most 1)")
    finally:
        if stop is not None:
            stop.set()
        cluster.stop()


if __name__ == "__main__":
    main()
