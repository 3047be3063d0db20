"""GPUs reach the tasks: the job rank 0 runs is allocated every GPU (and
core) that R declares, whatever the ratio of tasks to GPUs, on every front
door and target. The allocation is read from the rendered flags with Flux's
own rules (an exclusive node request takes the whole node); the real-Flux
proof is in tests/e2e (CUDA_VISIBLE_DEVICES in the tasks)."""

from __future__ import annotations

import json
import warnings

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.flux import jobspec
from fluxhop.flux.curve import CurveCert
from fluxhop.flux.resources import ResourceSet
from fluxhop.render import render
from fluxhop.spec import MiniCluster
from fluxhop.spec.flags import minicluster_from_flags
from tests.documents import minicluster_doc
from tests.render.entrypoint import config_data, run_flags

CERT = CurveCert.generate("gpus")
# (tasks per node, GPUs per node), from issue 17
RATIOS = [(1, 1), (2, 1), (8, 4), (4, 8), (3, 2)]


def allocated_gpus(flags: list[str], r: ResourceSet, up: int) -> int:
    """GPUs Flux allocates to ``flux run FLAGS`` on the first ``up`` nodes of R:
    an exclusive node request (``-x``, or ``-N`` alone) takes whole nodes, else
    each slot takes its ``-g``."""
    opts = {"-N": None, "-n": None, "-g": "0", "-c": "1"}
    exclusive = False
    words = iter(flags)
    for word in words:
        if word in ("--exclusive", "-x"):
            exclusive = True
        elif word in opts:
            opts[word] = next(words)
    nodes = int(opts["-N"]) if opts["-N"] else None
    spec = jobspec.from_command(
        ["app"],
        nodes=nodes,
        ntasks=int(opts["-n"]) if opts["-n"] else None,
        gpus_per_task=int(opts["-g"]),
        cores_per_task=int(opts["-c"]),
        exclusive=exclusive or opts["-n"] is None,
    )
    per_node = r.ngpus // r.nnodes
    assert spec.nnodes <= up
    if spec.exclusive:
        return spec.nnodes * per_node
    return spec.nslots * spec.gpus_per_slot


def gpu_file(size: int, per_node_tasks: int, gpus: int, resource: str = "nvidia.com/gpu"):
    container = {
        "image": "x",
        "command": "app",
        "resources": {"limits": {resource: gpus, "cpu": 8}},
    }
    return MiniCluster.from_dict(
        minicluster_doc("gpus", size=size, tasks=size * per_node_tasks, containers=[container])
    )


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "amd.com/gpu"])
@pytest.mark.parametrize("target", ["job", "jobset"])
@pytest.mark.parametrize(("tasks", "gpus"), RATIOS, ids=[f"{t}/{g}" for t, g in RATIOS])
def test_a_minicluster_file_allocates_every_gpu_of_r(tasks, gpus, target, resource):
    objects = render(gpu_file(2, tasks, gpus, resource), target, cert=CERT)
    r = ResourceSet.from_json(config_data(objects)["R"])
    assert (r.nnodes, r.ngpus) == (2, 2 * gpus)
    assert allocated_gpus(run_flags(objects), r, up=2) == r.ngpus


@pytest.mark.parametrize(("tasks", "gpus"), RATIOS, ids=[f"{t}/{g}" for t, g in RATIOS])
def test_cli_flags_allocate_every_gpu_of_r(tasks, gpus):
    """-g is GPUs per task, as in flux run; the pods ask for tasks x -g, and a
    per-node count that -g does not divide still reaches the tasks."""
    per_task = max(1, gpus // tasks)
    spec = minicluster_from_flags(
        ["app"], image="x", nodes=2, tasks=2 * tasks, cores_per_task=1, gpus_per_task=per_task
    )
    objects = render(spec, cert=CERT)
    r = ResourceSet.from_json(config_data(objects)["R"])
    assert r.ngpus == 2 * tasks * per_task
    flags = run_flags(objects)
    assert flags[flags.index("-g") + 1] == str(per_task)
    assert allocated_gpus(flags, r, up=2) == r.ngpus


def test_an_elastic_minicluster_allocates_every_gpu_of_the_nodes_that_are_up():
    doc = minicluster_doc(
        "gpus",
        size=2,
        maxSize=4,
        tasks=4,
        containers=[
            {
                "image": "x",
                "command": "app",
                "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 2}},
            }
        ],
    )
    objects = render(MiniCluster.from_dict(doc), cert=CERT)
    r = ResourceSet.from_json(config_data(objects)["R"])
    assert r.nnodes == 4  # R declares maxSize nodes; two are up
    assert allocated_gpus(run_flags(objects), r, up=2) == 2


def test_the_old_rule_would_have_lost_the_gpus():
    """The allocation model can fail: -g computed per task (the old rule)
    rounds 1 GPU over 2 tasks per node down to none."""
    r = ResourceSet.from_nodes(["a", "b"], cores=8, gpus=1)
    assert allocated_gpus(["-N", "2", "-n", "4"], r, up=2) == 0


def test_the_flux_operator_resource_carries_the_same_rule():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FluxhopWarning)
        resource = render(gpu_file(2, 2, 1), "minicluster")[0]
    assert resource["spec"]["tasks"] == 4
    assert resource["spec"]["flux"]["optionFlags"].split() == ["--exclusive"]


def test_the_flux_operator_resource_says_when_it_cannot():
    doc = minicluster_doc(
        "gpus",
        size=4,
        tasks=2,
        containers=[
            {"image": "x", "command": "app", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        ],
    )
    with pytest.warns(FluxhopWarning, match="fewer than spec.size") as record:
        resource = render(MiniCluster.from_dict(doc), "minicluster")[0]
    assert len(record) == 1
    assert "optionFlags" not in json.dumps(resource)


def test_fractional_gpus_are_an_error():
    doc = minicluster_doc(
        "gpus", containers=[{"image": "x", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]
    )
    with pytest.raises(SpecError) as info:
        MiniCluster.from_dict(doc)
    message = str(info.value)
    assert "nvidia.com/gpu" in message and "whole" in message and "\n" not in message


def test_gpus_only_in_requests_warn_and_go_to_limits():
    doc = minicluster_doc(
        "gpus", containers=[{"image": "x", "resources": {"requests": {"amd.com/gpu": 2}}}]
    )
    with pytest.warns(FluxhopWarning, match="only honours extended resources in limits") as record:
        spec = MiniCluster.from_dict(doc)
    assert len(record) == 1
    objects = render(spec, cert=CERT)
    workload = (
        objects[-1]
        if objects[-1]["kind"] == "Job"
        else next(o for o in objects if o["kind"] == "Job")
    )
    container = workload["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["amd.com/gpu"] == "2"


def test_gpu_requests_and_limits_that_differ_are_an_error():
    resources = {"requests": {"nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 1}}
    doc = minicluster_doc("gpus", containers=[{"image": "x", "resources": resources}])
    with pytest.raises(SpecError, match="differ"):
        MiniCluster.from_dict(doc)


def test_the_rabbit_minicluster_takes_whole_nodes_once():
    """rabbit.mpi.exclusive asked for what every job now gets: one --exclusive."""
    from fluxhop.rabbit import RabbitRequest
    from tests.rabbit.conftest import RABBITS, rabbit_job

    for mpi in ({"command": "app", "tasks": 8}, {"command": "app", "exclusive": True}):
        request = RabbitRequest.from_jobspec(rabbit_job(mpi))
        spec = request.to_minicluster(RABBITS, name="rabbit-job", uid=1001, gid=1001)
        flags = run_flags(render(spec, cert=CERT))
        assert flags[:2] == ["-N", str(len(RABBITS))] and flags.count("--exclusive") == 1
