"""The same work through fluxhop and the systems it replaces, on one real
cluster (plain script; prints numbers).

    sudo .venv/bin/python bench/bench_anchors.py [--sizes 2,4,8,16] [--runs 3] [--systems ...]
        [--caches warm,cold]

Needs root, the builds (python -m tests.build: the test cluster, the Flux
Operator, flux-core with Fluxion). A MiniCluster of N brokers runs
`hostname` on every rank through: `fluxhop run`; `fluxhop operator` (a
MiniCluster resource); the Flux Operator (the same resource); Kubeflow
Trainer's flux plugin (a TrainJob on the real Trainer controller); and
`fluxhop trainer run` (the same TrainJob); each with Flux from a view image
(fluxhop mounts it, an image volume, where the nodes can; the Flux Operator
and the Trainer plugin copy it in an init container) and, where the system
supports it, with Flux in the application image; with the nodes' image
caches warm, or cold (every image a run pulls removed from each node's
containerd first). The operators run before the clock starts,
as a user's would; the Flux Operator only while nothing else runs (it
watches every namespace). Per system, mode and N, the median over the runs
of: apply (start -> its first pod exists), all pods Running, rank 0's
command started (the time the kubelet stamped on its first line of output),
and Complete (the run's exit, or the resource's or Job's finished
condition), each from the start. Then fluxhop / Flux Operator per N and
mode (Complete), and last `worst ratio fluxhop/Flux Operator: R`.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2 as httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conformance import CONFORMANCE
from tests.realflux import flux_prefix, missing_flux
from tests.realk8s.api import Api
from tests.realk8s.binaries import bin_dir
from tests.realk8s.cluster import LocalCluster, free_port, missing_cluster
from tests.realk8s.controllers import CONTROLLERS, Running
from tests.realk8s.deployment import deploy
from tests.realk8s.fluxoperator import FluxOperator, missing_flux_operator
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.placing import REAL_NODES
from tests.realk8s.tools import FLUXHOP, command_env

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
RUNTIME = CONFORMANCE / "trainer-examples" / "examples__flux__flux-runtime.yaml"
TRAINJOB = CONFORMANCE / "trainer-examples" / "examples__flux__lammps-train-job.yaml"
PHASES = ("apply", "pods running", "command started", "complete")
CACHES = ("warm", "cold")  # the nodes' image caches as a run starts
# every image a measured run pulls (as containerd names them): the
# application images, the view images (fluxhop's and the Flux Operator's
# default, the Trainer plugin's), Flux in the image
IMAGES = [
    "docker.io/library/ubuntu:noble",
    "docker.io/fluxrm/flux-sched:bookworm",
    "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble",
    "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
]
VIEW, IN_IMAGE = "view", "in image"
MINICLUSTERS = "/apis/flux-framework.org/v1alpha2/namespaces/{}/miniclusters"


def stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Pods:
    """When the namespace's first pod appeared and when N of them ran (a watch)."""

    def __init__(self, api: Api, namespace: str, size: int) -> None:
        self.api, self.namespace, self.size = api, namespace, size
        self.first: float | None = None
        self.running: float | None = None
        path = f"/api/v1/namespaces/{namespace}/pods"
        self.version = api.get(path)["metadata"]["resourceVersion"]
        threading.Thread(target=self._watch, args=(path,), daemon=True).start()

    def _watch(self, path: str) -> None:
        phases: dict[str, str] = {}
        for _, pod in self.api.watch(path, self.version, timeout=600):
            name = pod.get("metadata", {}).get("name")
            if not name:
                continue
            if self.first is None:
                self.first = time.time()
            phases[name] = pod.get("status", {}).get("phase", "")
            if self.running is None and sum(p == "Running" for p in phases.values()) >= self.size:
                self.running = time.time()
                return


def command_started(
    api: Api, namespace: str, lead: Callable[[dict[str, Any]], bool]
) -> float | None:
    """When rank 0's command printed its first line (the kubelet's stamp)."""
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    for pod in pods:
        if lead(pod):
            text = api.text(f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/log",
                            timestamps="true", container=pod["spec"]["containers"][0]["name"])  # fmt: skip
            for line in text.splitlines():
                when, _, rest = line.partition(" ")
                if rest.startswith(("lead-", "anchor-", "train-")) and "-" in rest:  # a host name
                    return stamp(when)
    return None


def rank0(pod: dict[str, Any]) -> bool:
    labels = pod["metadata"].get("labels") or {}
    index = labels.get("batch.kubernetes.io/job-completion-index")
    return index == "0" and labels.get("jobset.sigs.k8s.io/job-index", "0") == "0"


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def until(check: Callable[[], bool], timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("bench_anchors: a run did not finish in time")
        time.sleep(0.05)
    return time.time()


def conditions(obj: dict[str, Any] | None) -> set[str]:
    return {
        c["type"]
        for c in (obj or {}).get("status", {}).get("conditions") or []
        if c["status"] == "True"
    }


class Bench:
    def __init__(self, cluster: LocalCluster, operator_kubeconfig: Path, tmp: Path) -> None:
        self.cluster, self.operator_kubeconfig, self.tmp = cluster, operator_kubeconfig, tmp

    def namespace(self) -> str:
        name = f"anchor-{uuid.uuid4().hex[:6]}"
        with self.cluster.admin() as api:
            api.create("/api/v1/namespaces", {"metadata": {"name": name}})
        return name

    def measure(
        self,
        size: int,
        start: Callable[[Api, str], Callable[[], float]],
        before: Callable[[str], Callable[[], None]] | None = None,
        *,
        cold: bool = False,
    ) -> dict[str, float]:
        """One run; ``before`` starts what runs before the clock in the
        namespace (an operator) and returns how to stop it. ``cold``: the
        images the systems run removed from every node first, so that the
        run pulls and unpacks them again."""
        namespace = self.namespace()
        stop = before(namespace) if before else None
        if cold:
            self.cluster.forget_images(IMAGES)
        try:
            with self.cluster.admin() as api, self.cluster.admin() as watcher:
                pods = Pods(watcher, namespace, size)
                started = time.time()
                complete = start(api, namespace)()
                command = command_started(api, namespace, rank0)
        finally:
            if stop is not None:
                stop()
        with self.cluster.admin() as api:
            api.delete(f"/api/v1/namespaces/{namespace}")
        if None in (pods.first, pods.running, command):
            raise SystemExit("bench_anchors: a phase went unseen")
        assert pods.first and pods.running and command
        return {"apply": pods.first - started, "pods running": pods.running - started,
                "command started": command - started, "complete": complete - started}  # fmt: skip

    # --- the systems --------------------------------------------------------------
    def fluxhop_run(self, size: int, mode: str) -> Callable[[Api, str], Callable[[], float]]:
        image = (
            ["--flux-in-image", "--image", FLUX_IMAGE]
            if mode == IN_IMAGE
            else ["--image", "ubuntu:noble"]
        )

        def start(api: Api, namespace: str) -> Callable[[], float]:
            argv = [str(FLUXHOP), "run", "--namespace", namespace, *image,
                    "-N", str(size), "--name", "lead", "--keep", "--", "hostname"]  # fmt: skip
            process = subprocess.Popen(argv, env=command_env(self.cluster), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)  # fmt: skip
            return lambda: (process.wait(), time.time())[1]

        return start

    @staticmethod
    def minicluster(size: int, mode: str, namespace: str) -> dict[str, Any]:
        """The resource both operators get: quiet, `hostname` on every rank."""
        flux = {"container": {"disable": True}} if mode == IN_IMAGE else {}
        image = FLUX_IMAGE if mode == IN_IMAGE else "ubuntu:noble"
        return {
            "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": "lead", "namespace": namespace},
            "spec": {"size": size, "tasks": size, "logging": {"quiet": True}, "flux": flux,
                     "containers": [{"image": image, "command": "hostname"}]},
        }  # fmt: skip

    def fluxhop_operator(self, size: int, mode: str) -> Callable[[Api, str], Callable[[], float]]:
        """fluxhop's operator for the namespace, started and ready (its
        liveness endpoint answers) before the clock, as a user's would be."""

        def start(api: Api, namespace: str) -> Callable[[], float]:
            api.create(MINICLUSTERS.format(namespace), self.minicluster(size, mode, namespace))
            path = f"{MINICLUSTERS.format(namespace)}/lead"
            return lambda: until(lambda: bool(conditions(api.find(path)) & {"Succeeded", "Failed"}))

        return start

    def fluxhop_operator_running(self, namespace: str) -> Callable[[], None]:
        """Start fluxhop's operator on ``namespace``; returns how to stop it."""
        log = open(self.tmp / f"operator-{namespace}.log", "wb")  # noqa: SIM115 (the child keeps it)
        liveness = f"http://127.0.0.1:{free_port()}/healthz"
        argv = [sys.executable, "-c", "import sys; from fluxhop.cli import main; sys.exit(main())",
                "operator", "-n", namespace, "--standalone", "--liveness", liveness]  # fmt: skip
        operator = subprocess.Popen(argv, env=command_env(self.cluster, self.operator_kubeconfig),
                                    stdout=log, stderr=log)  # fmt: skip
        until(lambda: operator.poll() is not None or answers(liveness), timeout=120)

        def stop() -> None:
            operator.terminate()
            operator.wait()
            log.close()

        return stop

    def flux_operator(self, size: int, mode: str) -> Callable[[Api, str], Callable[[], float]]:
        """The Flux Operator, already running (see main): a Job Complete or Failed."""

        def start(api: Api, namespace: str) -> Callable[[], float]:
            api.create(MINICLUSTERS.format(namespace), self.minicluster(size, mode, namespace))
            path = f"/apis/batch/v1/namespaces/{namespace}/jobs/lead"
            return lambda: until(lambda: bool(conditions(api.find(path)) & {"Complete", "Failed"}))

        return start

    def trainjob(self, size: int, namespace: str) -> dict[str, Any]:
        document = yaml.safe_load(TRAINJOB.read_text())
        document["metadata"].update(name="train", namespace=namespace)
        document["spec"]["trainer"].update(command=["hostname"], numNodes=size, numProcPerNode=1)
        return document

    def trainer(self, size: int, mode: str) -> Callable[[Api, str], Callable[[], float]]:
        def start(api: Api, namespace: str) -> Callable[[], float]:
            api.create(
                f"{TRAINER}/namespaces/{namespace}/trainjobs", self.trainjob(size, namespace)
            )
            path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/train"
            return lambda: until(lambda: bool(conditions(api.find(path)) & {"Completed", "Failed"}))

        return start

    def fluxhop_trainer(self, size: int, mode: str) -> Callable[[Api, str], Callable[[], float]]:
        def start(api: Api, namespace: str) -> Callable[[], float]:
            source = self.tmp / f"{namespace}.yaml"
            source.write_text(yaml.safe_dump(self.trainjob(size, namespace)))
            argv = [
                str(FLUXHOP),
                "trainer",
                "run",
                "-f",
                str(source),
                "--runtime",
                str(RUNTIME),
                "--keep",
            ]
            process = subprocess.Popen(argv, env=command_env(self.cluster), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)  # fmt: skip
            return lambda: (process.wait(), time.time())[1]

        return start


# system -> the modes it supports (the Trainer plugin always copies Flux from its view)
SYSTEMS = {
    "fluxhop run": (VIEW, IN_IMAGE),
    "fluxhop operator": (VIEW, IN_IMAGE),
    "Flux Operator": (VIEW, IN_IMAGE),
    "Kubeflow Trainer": (VIEW,),
    "fluxhop trainer run": (VIEW,),
}
OURS = ("fluxhop run", "fluxhop operator")


def measure_all(bench: Bench, cluster: LocalCluster, sizes: list[int], runs: int,
                systems: list[str], caches: list[str]) -> dict[tuple[str, str, int], dict[str, float]]:  # fmt: skip
    makers = {"fluxhop run": bench.fluxhop_run, "fluxhop operator": bench.fluxhop_operator,
              "Flux Operator": bench.flux_operator, "Kubeflow Trainer": bench.trainer,
              "fluxhop trainer run": bench.fluxhop_trainer}  # fmt: skip
    results: dict[tuple[str, str, int], dict[str, float]] = {}
    for size in sizes:
        for system in systems:
            theirs = FluxOperator(cluster) if system == "Flux Operator" else None
            if theirs is not None:
                theirs.start()  # before the clock, with nothing else running
            try:
                for mode, cache in itertools.product(SYSTEMS[system], caches):
                    before = (
                        bench.fluxhop_operator_running if system == "fluxhop operator" else None
                    )
                    timed = [bench.measure(size, makers[system](size, mode), before,
                                           cold=cache == "cold") for _ in range(runs)]  # fmt: skip
                    cell = labelled(mode, cache)
                    results[(system, cell, size)] = {
                        p: statistics.median(r[p] for r in timed) for p in PHASES
                    }
                    print(f"N={size:<3} {system:<20} {cell:<14} "
                          + "  ".join(f"{results[(system, cell, size)][p]:6.2f}" for p in PHASES),
                          flush=True)  # fmt: skip
            finally:
                if theirs is not None:
                    theirs.stop()
    return results


def labelled(mode: str, cache: str) -> str:
    """A cell's mode and cache, as printed ("view, warm")."""
    return f"{mode}, {cache}"


def ratios(results: dict[tuple[str, str, int], dict[str, float]], sizes: list[int]) -> float | None:
    """Print fluxhop / Flux Operator (Complete) per N, mode and cache; the worst."""
    worst = None
    cells = [labelled(mode, cache) for mode in (VIEW, IN_IMAGE) for cache in CACHES]
    for size in sizes:
        for mode in cells:
            base = results.get(("Flux Operator", mode, size))
            for system in OURS:
                ours = results.get((system, mode, size))
                if base is None or ours is None:
                    continue
                ratio = ours["complete"] / base["complete"]
                worst = ratio if worst is None else max(worst, ratio)
                print(f"N={size:<3} {mode:<9} {system} / Flux Operator (complete): {ratio:.2f}")
        for cache in CACHES:
            trainer = results.get(("Kubeflow Trainer", labelled(VIEW, cache), size))
            ours = results.get(("fluxhop trainer run", labelled(VIEW, cache), size))
            if trainer and ours:
                print(f"N={size:<3} {labelled(VIEW, cache)}  fluxhop trainer run / Trainer "
                      f"(complete): {ours['complete'] / trainer['complete']:.2f}")  # fmt: skip
    return worst


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2,4,8")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--caches", default="warm", help="warm, cold or both (comma-separated): "
                        "cold removes the images from every node before each run")  # fmt: skip
    args = parser.parse_args()
    caches = [c.strip() for c in args.caches.split(",")]
    if not set(caches) <= set(CACHES):
        raise SystemExit(f"bench_anchors: --caches takes {' and '.join(CACHES)}, not {args.caches}")
    systems = [s.strip() for s in args.systems.split(",")]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"bench_anchors: no system {unknown[0]!r}; systems: {', '.join(SYSTEMS)}")
    reason = missing_cluster() or missing_flux()
    if "Flux Operator" in systems:
        reason = reason or missing_flux_operator()
    if reason:
        raise SystemExit(f"bench_anchors: {reason}")
    sizes = [int(n) for n in args.sizes.split(",")]
    cluster = LocalCluster(bin_dir() or Path(), REAL_NODES, flux_prefix=flux_prefix()).start()
    controllers = []
    try:
        if {"Kubeflow Trainer", "fluxhop trainer run"} & set(systems):
            controllers = [
                Running(cluster, CONTROLLERS[name]).start() for name in ("jobset", "trainer")
            ]
            with cluster.admin() as api:
                api.create(
                    f"{TRAINER}/clustertrainingruntimes", yaml.safe_load(RUNTIME.read_text())
                )
        with tempfile.TemporaryDirectory() as tmp:
            bench = Bench(cluster, deploy(cluster, 24 * 3600), Path(tmp))
            print(f"median of {args.runs} runs, seconds from the start: " + " / ".join(PHASES))
            results = measure_all(bench, cluster, sizes, args.runs, systems, caches)
        worst = ratios(results, sizes)
        shown = "n/a (the Flux Operator was not measured)" if worst is None else f"{worst:.2f}"
        print(f"worst ratio fluxhop/Flux Operator: {shown}")
    finally:
        for running in controllers:
            running.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
