"""Real Flux on simulated pods, through the other front doors: a Kubeflow
Trainer TrainJob on the Flux runtime (the upstream example, with the plugin's
flux-installer init container) and a rabbit MiniCluster from ``fluxhop hop``."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fluxhop.trainer import build
from tests.realflux import flux_prefix
from tests.trainer.conftest import EXAMPLES, documents, flux_runtime

FLUXHOP = Path(sys.executable).parent / "fluxhop"


def lammps_trainjob(command: list[str], **trainer: int) -> dict:
    """The upstream LAMMPS TrainJob with a command this machine has, and its
    four ranks per node: R gives each node numProcPerNode cores (the
    plugin's rule), more than this 2-CPU machine has, which Flux accepts
    because fluxhop tells it those cores are slots (CORES_AS_SLOTS)."""
    (job,) = documents(EXAMPLES / "examples__flux__lammps-train-job.yaml")
    job = copy.deepcopy(job)
    job["spec"]["trainer"].update(command=command, **trainer)
    return job


def with_view_from_host(objects: list[dict]) -> list[dict]:
    """The flux-installer init container copies the Flux view out of its image;
    here the host's flux-core install stands in for that image's view."""
    jobset = objects[-1]
    for job in jobset["spec"]["replicatedJobs"]:
        for init in job["template"]["spec"]["template"]["spec"].get("initContainers", []):
            if init["name"] == "flux-installer":
                init.setdefault("env", []).append(
                    {"name": "FLUXHOP_VIEW_SOURCE", "value": str(flux_prefix())}
                )
    return objects


def node_job(objects: list[dict]) -> dict:
    return next(j for j in objects[-1]["spec"]["replicatedJobs"] if j["name"] == "node")


def test_the_lammps_trainjob_runs_on_every_rank(simulate):
    objects = with_view_from_host(build(lammps_trainjob(["hostname"]), flux_runtime()))
    done = simulate(objects).run()
    assert done.code == 0, done.explain()
    (job,) = documents(EXAMPLES / "examples__flux__lammps-train-job.yaml")
    nodes, procs = job["spec"]["trainer"]["numNodes"], job["spec"]["trainer"]["numProcPerNode"]
    assert procs > os.cpu_count()  # more slots than this machine has CPUs
    hosts = [f"lammps-flux-node-0-{i}" for i in range(nodes)]
    assert sorted(done.lead_lines()) == sorted(hosts * procs)


def test_one_rank_per_node_keeps_every_cpu_of_its_pod(simulate):
    """R's one core per node is a slot: bound to it (Flux's default
    cpu-affinity), the rank would get one CPU of the pod's."""
    command = ["grep", "Cpus_allowed_list", "/proc/self/status"]
    objects = with_view_from_host(build(lammps_trainjob(command, numProcPerNode=1), flux_runtime()))
    done = simulate(objects).run()
    assert done.code == 0, done.explain()
    ours = next(
        line
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("Cpus_allowed_list")
    )
    assert done.lead_lines() == [ours, ours]


def test_a_failing_training_command_fails_once(simulate):
    objects = with_view_from_host(build(lammps_trainjob(["sh", "-c", "exit 3"]), flux_runtime()))
    # podsim never retries; these are what keep Kubernetes from retrying
    assert node_job(objects)["template"]["spec"]["backoffLimit"] == 0
    assert objects[-1]["spec"]["failurePolicy"] == {"maxRestarts": 0}
    done = simulate(objects).run()
    assert done.code == 1, done.explain()
    lead = next(p for p in done.results() if p.startswith("lammps-flux-node-0-0-"))
    assert done.results()[lead] == ("Failed", "node=3")


def hop_objects(*args: str) -> list[dict]:
    out = subprocess.run(
        [str(FLUXHOP), "hop", *args, "--dry-run", "--output", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc = json.loads(out)
    return doc["items"] if isinstance(doc, dict) else doc


def without_placement(objects: list[dict]) -> list[dict]:
    """What only a rabbit system has: its node labels and taints, and the
    host's /sys directories (podsim mounts no hostPath)."""
    for obj in objects:
        if obj["kind"] != "Job":
            continue
        pod = obj["spec"]["template"]["spec"]
        for key in ("nodeSelector", "tolerations", "affinity"):
            pod.pop(key, None)
        host_paths = {v["name"] for v in pod["volumes"] if "hostPath" in v}
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] not in host_paths]
        for container in pod["containers"]:
            container["volumeMounts"] = [
                m for m in container["volumeMounts"] if m["name"] not in host_paths
            ]
    return objects


@pytest.mark.parametrize("exclusive", [[], ["--exclusive"]])
def test_a_rabbit_minicluster_from_hop(simulate, exclusive):
    objects = hop_objects(
        "--rabbits",
        "rabbit-p1,rabbit-p2",
        "--command",
        "sh -c 'echo $(hostname) $OMP_NUM_THREADS'",
        "--tasks",
        "4",
        "--env",
        "OMP_NUM_THREADS=4",
        "--name",
        "hop-e2e",
        "--target",
        "job",
        *exclusive,
    )
    done = simulate(without_placement(objects)).run()
    assert done.code == 0, done.explain()
    assert sorted(done.lead_lines()) == ["hop-e2e-0 4"] * 2 + ["hop-e2e-1 4"] * 2
