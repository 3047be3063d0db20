"""Benchmark autoscaling on the real test cluster (plain script; prints numbers).

    sudo .venv/bin/python bench/bench_autoscale.py [--runs 5]

Needs root, the built cluster (python -m tests.realk8s.build) and a
flux-core (FLUXHOP_FLUX_PREFIX or flux on PATH). A MiniCluster of size 1 and
maxSize 2; each run submits a job that needs 2 nodes, makes the decision
that grows it (``fluxhop autoscale --once``, in this process), and times:

* submit -> running: the job submitted until Flux runs it (the polling
  here is ``fluxhop proxy`` per look, about half a second each);
* decision -> running: the decision made until Flux runs the job;
* broker join: the resize until the new broker is online in Flux - what
  growth costs at least, measured in the same run;
* the decision itself, and its requests: HTTP requests fluxhop sends to the
  API server (an exec into rank 0, through the API's pods/exec, is one of
  them), and how many of those are execs.

The operator's autoscaling, which needs no stepping: bench_operator_autoscale.py.

Then it shrinks back (drain, then resize) for the next run. Goal: growth
adds no more than a broker's join (submit -> running minus join is the
decision and Flux's scheduling).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
from tests.realflux import flux_prefix, missing_flux
from tests.realk8s.binaries import bin_dir
from tests.realk8s.cluster import LocalCluster, missing_cluster
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.placing import REAL_NODES
from tests.realk8s.tools import FLUXHOP, command_env

from fluxhop.cli import main as fluxhop_main
from fluxhop.workload.verbs import FluxVerbs

NAME = "grow"


class Counted:
    """Counts what one in-process fluxhop command sends: HTTP requests and execs."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    @contextlib.contextmanager
    def watching(self):
        send, run = httpx2.Client.send, FluxVerbs.run

        def counted_send(client, request, *args, **kwargs):
            self.counts["requests"] += 1
            return send(client, request, *args, **kwargs)

        def counted_run(verbs, *args, **kwargs):
            self.counts["execs"] += 1  # each is one pods/exec request into rank 0
            return run(verbs, *args, **kwargs)

        with (
            mock.patch.object(httpx2.Client, "send", counted_send),
            mock.patch.object(FluxVerbs, "run", counted_run),
        ):
            yield self


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([str(FLUXHOP), *args], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"fluxhop {' '.join(args)}: {done.stderr}")
    return done.stdout


def until(check, what: str, timeout: float = 300) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.perf_counter()


def decide(namespace: str, env: dict[str, str], counted: Counted) -> str:
    out = io.StringIO()
    with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(out), counted.watching():
        code = fluxhop_main(["autoscale", NAME, "--namespace", namespace, "--once",
                             "--scale-down-delay", "0"])  # fmt: skip
    if code:
        raise SystemExit(f"fluxhop autoscale exited {code}")
    return out.getvalue().strip()


def one_run(namespace: str, env: dict[str, str]) -> dict[str, float]:
    ns = ["--namespace", namespace]

    def flux(*args: str) -> str:
        return cli(env, "proxy", *ns, NAME, "flux", *args)

    jobid = cli(env, "submit", NAME, *ns, "-N", "2", "--", "sleep", "1").strip()
    submitted = time.perf_counter()
    until(lambda: flux("jobs", "-no", "{state}", jobid).strip() == "SCHED", "the job pending")
    counted = Counted()
    started = time.perf_counter()
    line = decide(namespace, env, counted)
    decided = time.perf_counter()
    assert "1 -> 2" in line, line
    joined = until(lambda: flux("resource", "status", "-s", "online", "-no", "{nnodes}").strip()
                   == "2", "the new broker online")  # fmt: skip
    running = until(lambda: flux("jobs", "-no", "{state}", jobid).strip() in ("RUN", "CLEANUP",
                    "INACTIVE"), "the job running")  # fmt: skip
    until(lambda: flux("jobs", "-no", "{state}", jobid).strip() == "INACTIVE", "the job done")
    for _ in range(3):  # drain, then shrink
        if "-> 1" in decide(namespace, env, Counted()):
            break
    until(lambda: flux("resource", "status", "-s", "online", "-no", "{nnodes}").strip() == "1",
          "back to one broker")  # fmt: skip
    return {
        "submit -> running": running - submitted,
        "decision -> running": running - decided,
        "decision": decided - started,
        "broker join (resize -> online)": joined - decided,
        "HTTP requests per decision": counted.counts["requests"],
        "execs per decision (of the requests)": counted.counts["execs"],
    }


def started_cluster(bench: str) -> LocalCluster:
    """The test cluster with its two real nodes, started; or exit saying what is missing."""
    reason = missing_cluster() or missing_flux()
    if reason:
        raise SystemExit(f"{bench}: {reason}")
    cluster = LocalCluster(bin_dir() or Path(), REAL_NODES, flux_prefix=flux_prefix())
    cluster.start()
    return cluster


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cluster = started_cluster("bench_autoscale")
    try:
        env = command_env(cluster)
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        with cluster.admin() as api:
            api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        cli(env, "create", "--namespace", namespace, "--name", NAME, "-N", "1", "--max-size", "2",
            "--flux-in-image", "--image", FLUX_IMAGE)  # fmt: skip
        runs = [one_run(namespace, env) for _ in range(args.runs)]
        print(f"autoscaling a MiniCluster 1 -> 2 for a 2-node job (median of {args.runs}):")
        for key in runs[0]:
            value = statistics.median(r[key] for r in runs)
            print(f"  {key:<32} {value:8.2f}" + ("" if "per decision" in key else " s"))
        grow = statistics.median(r["decision -> running"] for r in runs)
        join = statistics.median(r["broker join (resize -> online)"] for r in runs)
        print(f"  decision -> running / broker join = {grow / join:.2f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
