"""GPUs reach the tasks, on real Flux: R declares the pods' GPUs (Flux does not
probe for them here, which is how this runs on machines without GPUs), and
every task of the job rank 0 runs sees GPUs - never the ``-1`` that
flux-core's shell sets for a job that was allocated none. Under Fluxion and
under sched-simple: both allocate the GPUs R declares."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections import defaultdict

import pytest

from fluxhop.local.instance import LocalInstance
from fluxhop.render import render
from fluxhop.trainer import build
from tests.e2e.test_front_doors import lammps_trainjob, with_view_from_host
from tests.e2e.test_minicluster import spec
from tests.realflux import flux_prefix
from tests.realflux.schedulers import FLUXION, Scheduler
from tests.trainer.conftest import flux_runtime

SHOW = ["sh", "-c", 'echo "$(hostname) ${CUDA_VISIBLE_DEVICES-unset}"']


def gpus_by_host(lines: list[str]) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        host, devices = line.split()
        seen[host].append(devices)
    return {host: sorted(devices) for host, devices in seen.items()}


def gpu_spec(gpus: int, tasks_per_node: int, *option_flags: str, scheduler: Scheduler = FLUXION):
    flux: dict = {"container": {"disable": True}}
    if option_flags:
        flux["optionFlags"] = " ".join(option_flags)
    return spec(
        SHOW,
        size=2,
        tasks=2 * tasks_per_node,
        container={"resources": {"limits": {"nvidia.com/gpu": gpus}}},
        flux=scheduler.flux(**flux),
    )


def test_one_gpu_per_node_two_tasks_per_node_every_task_sees_it(simulate, scheduler):
    done = simulate(render(gpu_spec(1, 2, scheduler=scheduler), "job")).run()
    assert done.code == 0, done.explain()
    assert gpus_by_host(done.lead_lines()) == {"e2e-0": ["0", "0"], "e2e-1": ["0", "0"]}


def test_gpu_affinity_per_task_splits_a_nodes_gpus(simulate, scheduler):
    flags = ("-o", "gpu-affinity=per-task")
    done = simulate(render(gpu_spec(2, 2, *flags, scheduler=scheduler), "job")).run()
    assert done.code == 0, done.explain()
    assert gpus_by_host(done.lead_lines()) == {"e2e-0": ["0", "1"], "e2e-1": ["0", "1"]}


def test_more_ranks_than_gpus_in_a_trainjob(simulate):
    job = lammps_trainjob(SHOW, numProcPerNode=2)
    job["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": 1}}
    done = simulate(with_view_from_host(build(job, flux_runtime()))).run()
    assert done.code == 0, done.explain()
    hosts = {f"lammps-flux-node-0-{i}": ["0", "0"] for i in range(2)}
    assert gpus_by_host(done.lead_lines()) == hosts


@pytest.fixture
def flux_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{flux_prefix()}/bin{os.pathsep}{os.environ['PATH']}")
    short = tempfile.mkdtemp(prefix="fh-", dir="/tmp")  # broker socket paths must stay short
    monkeypatch.setenv("TMPDIR", short)
    yield
    shutil.rmtree(short, ignore_errors=True)


def test_the_local_backend_gives_the_tasks_their_gpus(flux_on_path):
    out = io.StringIO()
    code = LocalInstance(gpu_spec(1, 2), stdout=out, stderr=io.StringIO(), join_timeout=60).run()
    assert code == 0
    devices = [line.split()[1] for line in out.getvalue().splitlines()]
    assert devices == ["0"] * 4
