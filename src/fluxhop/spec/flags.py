"""A MiniCluster from Flux-style flags: ``-N nodes -n tasks -c cores -g gpus``.

``-c`` and ``-g`` keep Flux's meaning (per task). The pods request what their
tasks need (tasks per node x cores, tasks per node x GPUs), so the R that
fluxhop computes from the pod resources never claims more than a pod has.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence

from fluxhop.arguments import checked
from fluxhop.errors import SpecError
from fluxhop.flux.limits import MAX_CORES_PER_NODE, MAX_GPUS_PER_NODE
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.names import random_name
from fluxhop.spec.placement import Placement, place
from fluxhop.spec.rules import MAX_NODES

__all__ = ["minicluster_from_flags", "parse_env"]


@checked
def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings to a mapping; a missing ``=`` is an error."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"--env {item!r}: write it as KEY=VALUE")
        env[key] = value
    return env


@checked
def minicluster_from_flags(
    command: Sequence[str],
    *,
    image: str,
    nodes: int = 1,
    tasks: int | None = None,
    cores_per_task: int | None = None,
    gpus_per_task: int | None = None,
    gpu_resource: str = "nvidia.com/gpu",
    workdir: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
    namespace: str = "default",
    max_size: int | None = None,
    view_image: str | None = None,
    flux_in_image: bool = False,
    queue_policy: str | None = None,
    simple_scheduler: bool = False,
    extra_flux_args: Sequence[str] = (),
    placement: Placement | None = None,
) -> MiniCluster:
    if nodes < 1:
        raise SpecError(f"-N/--nodes must be 1 or more, not {nodes}")
    if nodes > MAX_NODES:
        raise SpecError(
            f"-N/--nodes {nodes} is more than {MAX_NODES}, the most pods an Indexed Job may have"
        )
    if max_size is not None and max_size < nodes:
        raise SpecError(f"--max-size {max_size} is smaller than -N {nodes}; raise it or drop it")
    ntasks = nodes if tasks is None else tasks
    if ntasks < 1:
        raise SpecError(f"-n/--ntasks must be 1 or more, not {ntasks}")
    if ntasks < nodes:
        raise SpecError(f"-n {ntasks} is fewer tasks than -N {nodes} nodes; give every node a task")
    per_node = math.ceil(ntasks / nodes)
    if per_node > MAX_CORES_PER_NODE:
        raise SpecError(
            f"-n {ntasks} on -N {nodes} is {per_node} tasks per node, more than any node has "
            f"cores for (at most {MAX_CORES_PER_NODE}); add nodes or run fewer tasks"
        )
    flags: list[str] = []
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if cores_per_task is not None:
        if cores_per_task < 1:
            raise SpecError(f"-c/--cores-per-task must be 1 or more, not {cores_per_task}")
        if per_node * cores_per_task > MAX_CORES_PER_NODE:
            raise SpecError(
                f"-c/--cores-per-task {cores_per_task} with {per_node} task(s) per node asks "
                f"{per_node * cores_per_task} cores of a node; no node has more than "
                f"{MAX_CORES_PER_NODE}"
            )
        flags += ["-c", str(cores_per_task)]
        requests["cpu"] = str(per_node * cores_per_task)
    if gpus_per_task:
        if "/" not in gpu_resource or gpu_resource.partition("/")[0].endswith("kubernetes.io"):
            raise SpecError(
                f"--gpu-resource {gpu_resource!r} is not a device resource: name the device "
                "plugin's resource, such as nvidia.com/gpu or amd.com/gpu"
            )
        if gpus_per_task < 0:
            raise SpecError(f"-g/--gpus-per-task must be 0 or more, not {gpus_per_task}")
        if per_node * gpus_per_task > MAX_GPUS_PER_NODE:
            raise SpecError(
                f"-g/--gpus-per-task {gpus_per_task} with {per_node} task(s) per node asks "
                f"{per_node * gpus_per_task} GPUs of a node; no node has more than "
                f"{MAX_GPUS_PER_NODE}"
            )
        flags += ["-g", str(gpus_per_task)]
        limits[gpu_resource] = str(per_node * gpus_per_task)
    flags += list(extra_flux_args)
    container: dict[str, object] = {"image": image}
    if command:
        container["command"] = list(command)
    if workdir:
        container["workingDir"] = workdir
    if env:
        container["environment"] = dict(env)
    if requests or limits:
        container["resources"] = {"requests": requests, "limits": limits}
    flux: dict[str, object] = {}
    if flags:
        flux["optionFlags"] = shlex.join(flags)
    if view_image or flux_in_image:
        flux["container"] = {"image": view_image} if view_image else {"disable": True}
    scheduler: dict[str, object] = {}
    if simple_scheduler:
        scheduler["simple"] = True
    if queue_policy:
        scheduler["queuePolicy"] = queue_policy
    if scheduler:
        flux["scheduler"] = scheduler
    spec: dict[str, object] = {
        "size": nodes,
        "tasks": ntasks,
        "interactive": not command,
        "containers": [container],
    }
    if max_size is not None:
        spec["maxSize"] = max_size
    if flux:
        spec["flux"] = flux
    document: dict[str, object] = {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name or random_name(), "namespace": namespace},
        "spec": spec,
    }
    return MiniCluster.from_dict(place(document, placement) if placement else document)
