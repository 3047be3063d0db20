"""Many MiniClusters at once: fluxhop's operator against the Flux Operator,
on one real cluster (plain script; prints a table).

    sudo .venv/bin/python bench/bench_operator_scale.py [--count 1000]

Needs root and the builds (python -m tests.build: the test cluster and the
Flux Operator). COUNT MiniClusters of size 1 are created in a fresh
namespace with `fluxhop operator` running on it, then deleted; then the same
in another fresh namespace with the Flux Operator running (never both at
once: it watches every namespace). The one node is kwok's: its pods read
Running while nothing runs (tests/realk8s/kwok.py): what
is measured is the operators, not Flux. Per operator and phase:

  create   the POSTs of all COUNT -> every MiniCluster has its Job (time),
           and on until every pod is Running (requests, memory, CPU);
  resync   the operator restarted with all COUNT unchanged -> it has
           reconciled every one (its own log says so, per MiniCluster);
  delete   one DELETE of the collection -> no MiniCluster, Job or pod left.

Figures: seconds; API requests by verb, as the API server's audit log has
them (the operator's ServiceAccount only, never its own count); peak RSS
(MiB, sampled every 0.1 s) and CPU-seconds of the operator process. The
operators start before the clock, as a user's would be running. Last line:
`worst ratio fluxhop operator/Flux Operator: R`, the largest ratio over
every phase's time, total requests, memory and CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realk8s import audit, deployment, fluxoperator
from tests.realk8s.api import Api
from tests.realk8s.binaries import bin_dir, missing_binaries
from tests.realk8s.cluster import LocalCluster, NodeSpec, free_port
from tests.realk8s.fluxoperator import FluxOperator, missing_flux_operator
from tests.realk8s.tools import FLUXHOP, command_env

MINICLUSTERS = "/apis/flux-framework.org/v1alpha2/namespaces/{}/miniclusters"
JOBS = "/apis/batch/v1/namespaces/{}/jobs"
PODS = "/api/v1/namespaces/{}/pods"
PHASES = ("create", "resync", "delete")
FIGURES = ("seconds", "requests", "peak RSS MiB", "CPU s")
AUDITED = tuple(
    f"system:serviceaccounts:{namespace}"
    for namespace in (deployment.DEPLOY_NAMESPACE, fluxoperator.NAMESPACE)
)
TICK = os.sysconf("SC_CLK_TCK")


def resource(name: str) -> dict[str, Any]:
    """The MiniCluster both operators get: one broker, a command that would
    run for ever (nothing runs: the node only marks its pods Running)."""
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name},
        "spec": {"size": 1, "containers": [{"image": "ubuntu:24.04", "command": "sleep infinity"}]},
    }


# --- the operator process: memory and CPU -------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Usage(threading.Thread):
    """Peak RSS and CPU-seconds of one process over a window."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.cpu = pid, 0.0, 0.0
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.wait(0.1):
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
                self.cpu = cpu_seconds(self.pid)
            except (OSError, IndexError):
                return  # the process ended

    def begin(self) -> None:
        self.peak, self.cpu0 = rss_mib(self.pid), cpu_seconds(self.pid)
        self.cpu = self.cpu0

    def end(self) -> dict[str, float]:
        """The window's figures, from ``begin`` on."""
        peak, cpu = max(self.peak, rss_mib(self.pid)), cpu_seconds(self.pid) - self.cpu0
        return {"peak RSS MiB": peak, "CPU s": cpu}

    def stop(self) -> None:
        self.stopping.set()


# --- what the cluster holds: a watch per kind ---------------------------------------


class Present(threading.Thread):
    """The objects at ``path`` (name -> pod phase, or "" for other kinds),
    kept by a watch; ``wait`` returns when a condition first held."""

    def __init__(self, api: Api, path: str) -> None:
        super().__init__(daemon=True)
        self.api, self.path = api, path
        self.objects: dict[str, str] = {}
        self.changed = threading.Condition()
        self.version = self._list()
        self.start()

    def _list(self) -> str:
        listed = self.api.get(self.path)
        with self.changed:
            self.objects = {o["metadata"]["name"]: self._phase(o) for o in listed["items"]}
            self.changed.notify_all()
        return str(listed["metadata"]["resourceVersion"])

    @staticmethod
    def _phase(obj: dict[str, Any]) -> str:
        return str((obj.get("status") or {}).get("phase", ""))

    def run(self) -> None:
        while True:
            try:
                for kind, obj in self.api.watch(self.path, self.version, timeout=600):
                    if kind == "ERROR":
                        raise RuntimeError(obj.get("message"))
                    self.version = obj["metadata"].get("resourceVersion", self.version)
                    name = obj["metadata"].get("name")
                    if kind == "BOOKMARK" or not name:
                        continue
                    with self.changed:
                        if kind == "DELETED":
                            self.objects.pop(name, None)
                        else:
                            self.objects[name] = self._phase(obj)
                        self.changed.notify_all()
            except Exception:  # a CRD replaced (its storage restarts), the cluster stopping
                time.sleep(0.5)
                try:
                    self.version = self._list()
                except Exception:
                    continue

    def wait(self, check: Callable[[dict[str, str]], bool], timeout: float = 1800) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: check(self.objects), timeout):
                raise SystemExit(f"bench_operator_scale: {self.path} did not get there in time")
            return time.time()


# --- the two operators ---------------------------------------------------------------


class FluxhopOperator:
    name, user = "fluxhop operator", deployment.USER
    # kopf's line for each resource whose handler ran (resume, create or update)
    DONE = re.compile(r"\[[^/\]]+/([^\]]+)\] Handler 'on_minicluster' succeeded")

    def __init__(self, cluster: LocalCluster, kubeconfig: Path, namespace: str, log: Path) -> None:
        self.cluster, self.kubeconfig, self.namespace, self.log = (
            cluster,
            kubeconfig,
            namespace,
            log,
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        liveness = f"http://127.0.0.1:{free_port()}/healthz"
        argv = [str(FLUXHOP), "operator", "-n", self.namespace, "--standalone",
                "--liveness", liveness]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(argv, env=command_env(self.cluster, self.kubeconfig),
                                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 120
        while not answers(liveness):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"bench_operator_scale: fluxhop operator did not start: {self.log}"
                )
            time.sleep(0.05)
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait()

    def restart(self) -> int:
        self.stop()
        return self.start()

    def text(self) -> str:
        return self.log.read_text(errors="replace")


class TheFluxOperator:
    name, user = "Flux Operator", fluxoperator.USER
    # each reconcile logs its request, then "MiniCluster is Ready!" at its end
    # (one worker: its lines are in order)
    REQUEST = re.compile(r'Request: .*"req": (?:"[^/"]+/([^"]+)"|\{"name":"([^"]+)")')
    READY = "MiniCluster is Ready!"

    def __init__(self, cluster: LocalCluster) -> None:
        # a process, as fluxhop's is here: both measured by their PIDs
        self.operator = FluxOperator(cluster, process=True)

    def start(self) -> int:
        return self._pid(self.operator.start())

    def restart(self) -> int:
        return self._pid(self.operator.restart())

    @staticmethod
    def _pid(operator: FluxOperator) -> int:
        assert operator.process is not None and operator.process.popen is not None
        return operator.process.popen.pid

    def stop(self) -> None:
        self.operator.stop()

    def text(self) -> str:
        assert self.operator.process is not None
        return self.operator.process.log.read_text(errors="replace")


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def reconciled(operator: FluxhopOperator | TheFluxOperator, since: int) -> set[str]:
    """The MiniClusters the operator's log says it reconciled after offset ``since``."""
    text = operator.text()[since:]
    if isinstance(operator, FluxhopOperator):
        return set(operator.DONE.findall(text))
    done, current = set(), None
    for line in text.splitlines():
        found = operator.REQUEST.search(line)
        if found:
            current = found.group(1) or found.group(2)
        elif operator.READY in line and current:
            done.add(current)
    return done


# --- one operator through the three phases ------------------------------------------


def measure(cluster: LocalCluster, operator: Any, namespace: str, count: int) -> dict[str, Any]:
    names = [f"mc-{i:04d}" for i in range(count)]
    everyone = set(names)
    results: dict[str, Any] = {}
    with cluster.admin() as api:
        usage = Usage(operator.start())  # first: the Flux Operator replaces the CRD
        jobs, pods, clusters = (Present(Api(cluster.credentials()), path.format(namespace))
                                for path in (JOBS, PODS, MINICLUSTERS))  # fmt: skip
        windows: dict[str, tuple[float, float]] = {}

        usage.begin()
        start = time.time()
        for name in names:
            api.create(MINICLUSTERS.format(namespace), resource(name))
        has_jobs = jobs.wait(lambda o: len(o) >= count)
        done = pods.wait(lambda o: sum(p == "Running" for p in o.values()) >= count)
        windows["create"] = (start, done)
        results["create"] = {"seconds": has_jobs - start, **usage.end()}
        print(f"  {operator.name}: create done ({has_jobs - start:.1f} s to every Job)", flush=True)

        usage.stop()
        since = len(operator.text())
        start = time.time()
        usage = Usage(operator.restart())
        usage.begin()
        deadline = time.monotonic() + 1800
        while not reconciled(operator, since) >= everyone:
            if time.monotonic() > deadline:
                raise SystemExit("bench_operator_scale: the resync did not reach every MiniCluster")
            time.sleep(0.05)
        done = time.time()
        windows["resync"] = (start, done)
        results["resync"] = {"seconds": done - start, **usage.end()}
        print(f"  {operator.name}: resync done ({done - start:.1f} s)", flush=True)

        usage.begin()
        start = time.time()
        api.delete(MINICLUSTERS.format(namespace))
        for kind, present in (("MiniCluster", clusters), ("Job", jobs), ("pod", pods)):
            done = present.wait(lambda o: not o)
            print(f"  {operator.name}: no {kind} left after {done - start:.1f} s", flush=True)
        windows["delete"] = (start, done)
        results["delete"] = {"seconds": done - start, **usage.end()}
        usage.stop()
        operator.stop()

    found = audit.requests(cluster.audit_log, operator.user)
    for phase, (start, done) in windows.items():
        verbs = audit.count(found, start, done)
        results[phase]["requests"] = sum(verbs.values())
        results[phase]["verbs"] = verbs
    return results


# --- the table --------------------------------------------------------------------------


def by_verb(counted: Counter[str]) -> str:
    """ "get 30 (jobs 20, pods 10), list 5 (pods 5)" from counts of "verb resource"."""
    verbs: dict[str, Counter[str]] = {}
    for key, n in counted.items():
        verb, _, resource = key.partition(" ")
        verbs.setdefault(verb, Counter())[resource] += n
    return (
        ", ".join(
            f"{verb} {sum(c.values())} ("
            + ", ".join(f"{r or '-'} {n}" for r, n in c.most_common())
            + ")"
            for verb, c in sorted(verbs.items())
        )
        or "none"
    )


def table(results: dict[str, dict[str, Any]], count: int) -> float:
    ours, theirs = results["fluxhop operator"], results["Flux Operator"]
    print(f"\n{count} MiniClusters of size 1; fluxhop operator | Flux Operator | ratio")
    worst = 0.0
    for phase in PHASES:
        for figure in FIGURES:
            a, b = ours[phase][figure], theirs[phase][figure]
            ratio = a / b if b else (1.0 if not a else float("inf"))
            worst = max(worst, ratio)
            print(f"{phase:<7} {figure:<13} {a:10.1f} | {b:10.1f} | {ratio:6.2f}")
        for name, system in (("fluxhop operator", ours), ("Flux Operator", theirs)):
            print(f"{phase:<7}   requests, {name}: {by_verb(system[phase]['verbs'])}")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    reason = missing_binaries() or missing_flux_operator()
    reason = reason or (None if os.geteuid() == 0 else "needs root")
    if reason:
        raise SystemExit(f"bench_operator_scale: {reason}")
    room = str(args.count + 100)
    node = NodeSpec("marker", capacity={"cpu": room, "memory": f"{room}Gi", "pods": room},
                    kwok=True)  # fmt: skip
    cluster = LocalCluster(bin_dir() or Path(), [node], audited=AUDITED).start()
    results: dict[str, dict[str, Any]] = {}
    try:
        kubeconfig = deployment.deploy(cluster, 24 * 3600)
        with tempfile.TemporaryDirectory() as tmp:
            for make in (
                lambda ns: FluxhopOperator(cluster, kubeconfig, ns, Path(tmp) / f"{ns}.log"),
                lambda ns: TheFluxOperator(cluster),
            ):
                namespace = f"scale-{uuid.uuid4().hex[:6]}"
                with cluster.admin() as api:
                    api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
                operator = make(namespace)
                print(f"{operator.name} in {namespace}:", flush=True)
                results[operator.name] = measure(cluster, operator, namespace, args.count)
        worst = table(results, args.count)
        print(f"worst ratio fluxhop operator/Flux Operator: {worst:.2f}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
