"""What a TrainJob and its runtime ask for, resolved once.

The plugin's precedence rules, made total (reference/kubeflow-trainer-flux-plugin.md):

* nodes: ``TrainJob.spec.trainer.numNodes`` -> runtime ``mlPolicy.numNodes`` -> 1
  (the plugin panicked without the first);
* tasks per node: TrainJob ``numProcPerNode`` -> ``mlPolicy.flux.numProcPerNode`` -> 1;
* argv: command (TrainJob, else runtime container) followed by args (TrainJob,
  else runtime container), kept as a list - never joined into one string;
* GPUs per node: the first resource with "gpu" in its name, from the
  TrainJob's ``resourcesPerNode`` else the runtime container;
* ``FLUX_VIEW_IMAGE`` / ``FLUX_NETWORK_DEVICE`` / ``FLUX_QUEUE_POLICY``: the
  TrainJob's env over the runtime container's env over the defaults;
* the broker hosts' DNS subdomain: the runtime's ``network.subdomain`` if set,
  else the JobSet (TrainJob) name.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.errors import shown
from fluxhop.flux.broker import QUEUE_POLICIES
from fluxhop.flux.limits import MAX_CORES_PER_NODE
from fluxhop.spec.names import dns_label_problem
from fluxhop.spec.quantity import parse_quantity, size_problem
from fluxhop.spec.rules import MAX_NODES, env_name_problem, image_problem, resource_name_problem
from fluxhop.trainer.errors import TrainerError
from fluxhop.trainer.fields import screen_runtime, screen_trainjob
from fluxhop.trainer.schema import check_document

__all__ = [
    "ANCESTOR_LABEL",
    "DEFAULTS",
    "INSTALLER",
    "NODE",
    "POLICIES",
    "Plan",
    "plan",
    "uses_flux",
]

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")
NODE = "node"
INSTALLER = "flux-installer"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
DEFAULTS = {
    "FLUX_VIEW_IMAGE": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
    "FLUX_NETWORK_DEVICE": "eth0",
    "FLUX_QUEUE_POLICY": "fcfs",
}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TrainerError(f"{where} must be a mapping, not {type(value).__name__}")
    return value


def _count(value: Any, where: str, most: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TrainerError(f"{where} must be a whole number, not {value!r}")
    if value < 1:
        raise TrainerError(f"{where} is {value}; it must be 1 or more")
    if most is not None and value > most:
        what = "pods a Job may have" if most == MAX_NODES else "cores any node has (a rank each)"
        raise TrainerError(f"{where} is {value}; at most {most}, the most {what}")
    return value


def _words(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise TrainerError(f"{where} must be a list of strings (one per argv word)")
    return list(value)


def _check_kind(doc: Mapping[str, Any], kinds: tuple[str, ...], what: str) -> None:
    if not isinstance(doc, Mapping):
        raise TrainerError(f"the {what} must be a mapping (a Kubernetes object)")
    if doc.get("kind") not in kinds:
        raise TrainerError(f"expected a {' or '.join(kinds)}, got kind {doc.get('kind')!r}")
    version = doc.get("apiVersion")
    if version is not None and version != API_VERSION:
        raise TrainerError(f"{doc['kind']} apiVersion must be {API_VERSION}, not {version!r}")
    check_document(doc)


def _ml_policy(runtime: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(runtime.get("spec"), "runtime spec").get("mlPolicy"), "spec.mlPolicy")


def uses_flux(runtime: Mapping[str, Any]) -> bool:
    """Whether the runtime's ML policy is Flux (after checking it has only one)."""
    _check_kind(runtime, RUNTIME_KINDS, "runtime")
    policy = _ml_policy(runtime)
    chosen = [name for name in POLICIES if policy.get(name) is not None]
    if len(chosen) > 1:
        raise TrainerError(
            f"runtime {runtime.get('metadata', {}).get('name')}: spec.mlPolicy sets "
            f"{' and '.join(chosen)}; a runtime has one ML policy"
        )
    return chosen == ["flux"]


def _literal_env(env: Any, where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    if env is not None and not isinstance(env, list):
        raise TrainerError(f"{where} must be a list of env entries (name, value)")
    for i, entry in enumerate(env or []):
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise TrainerError(f"{where}: every env entry needs a name")
        problem = env_name_problem(str(entry["name"]))
        if problem:
            raise TrainerError(f"{where}: {entry['name']!r} {problem}")
        if not isinstance(entry.get("value", ""), str):
            raise TrainerError(f"{where}: the value of {entry['name']} must be a string")
        if entry["name"] in DEFAULTS and "valueFrom" not in entry:
            value = str(entry.get("value", ""))
            problem = _setting_problem(entry["name"], value)
            if problem:
                raise TrainerError(f"{where}[{i}] {entry['name']}={value!r} {problem}")
            values[entry["name"]] = value
    return values


def upsert_env(base: list[dict[str, Any]], overrides: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Env entries of ``base`` with ``overrides`` replacing same-named ones."""
    merged = {entry["name"]: copy.deepcopy(entry) for entry in base}
    for entry in overrides:
        merged[entry["name"]] = copy.deepcopy(dict(entry))
    return list(merged.values())


def _check_sizes(resources: Mapping[str, Any], where: str) -> None:
    """Every name a container resource, every amount a quantity, none beyond
    what any node has."""
    for section in ("requests", "limits"):
        for name, amount in _mapping(resources.get(section), f"{where}.{section}").items():
            named = resource_name_problem(str(name))
            if named:
                raise TrainerError(f"{where}.{section}: {shown(str(name))} {named}")
            try:
                count = parse_quantity(amount)
            except ValueError as err:
                raise TrainerError(f"{where}.{section}.{name}: {err}") from None
            problem = size_problem(name, count)
            if problem:
                raise TrainerError(f"{where}.{section}.{name} is {amount}: {problem}")


def _gpus(resources: Mapping[str, Any], where: str) -> tuple[str | None, int]:
    """The GPU resource name and count per node (requests first, as the plugin)."""
    _check_sizes(resources, where)
    for section in ("requests", "limits"):
        for name, amount in _mapping(resources.get(section), f"{where}.{section}").items():
            if "gpu" in name.lower():
                count = parse_quantity(amount)
                if count % 1 or count < 0:
                    raise TrainerError(
                        f"{where}.{section}.{name} is {amount!r}: GPUs come in whole units; "
                        "use a whole number"
                    )
                return name, int(count)
    return None, 0


@dataclass(frozen=True)
class Plan:
    """Everything the JobSet and the Flux bootstrap need, resolved."""

    name: str
    namespace: str
    uid: str | None
    nodes: int
    procs_per_node: int
    gpu_resource: str | None
    gpus_per_node: int
    argv: list[str]
    image: str
    env: list[dict[str, Any]]
    resources: dict[str, Any]
    settings: dict[str, str]
    subdomain: str
    jobset_spec: dict[str, Any]  # the runtime's JobSet template spec (a copy)
    jobset_meta: dict[str, Any]
    node_job: int  # index of the `node` replicated job
    suspend: bool | None = None  # TrainJob spec.suspend, which the JobSet mirrors

    @property
    def tasks(self) -> int:
        return self.nodes * self.procs_per_node


def _node_job(spec: Mapping[str, Any], runtime_name: str) -> int:
    jobs = spec.get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        raise TrainerError(f"runtime {runtime_name} has no spec.template.spec.replicatedJobs")
    for i, job in enumerate(jobs):
        if not isinstance(job, Mapping):
            raise TrainerError(
                f"runtime {runtime_name}: spec.template.spec.replicatedJobs[{i}] must be a mapping"
            )
    names = [job.get("name") for job in jobs if isinstance(job, Mapping)]
    if NODE not in names:
        raise TrainerError(
            f"runtime {runtime_name} has no replicated job named {NODE!r} (found "
            f"{', '.join(map(str, names)) or 'none'}); Flux runs in the trainer job named node"
        )
    index = names.index(NODE)
    job = jobs[index]
    replicas = job.get("replicas", 1)
    if replicas != 1:
        raise TrainerError(
            f"runtime {runtime_name}: replicated job node has replicas {replicas}; it must be 1"
        )
    return index


def _pod_spec(job: Mapping[str, Any], runtime_name: str) -> Mapping[str, Any]:
    pod = _mapping(
        _mapping(_mapping(job.get("template"), "node template").get("spec"), "node job spec").get(
            "template"
        ),
        "node pod template",
    )
    return _mapping(pod.get("spec"), "node pod spec")


def _node_container(pod: Mapping[str, Any], runtime_name: str) -> Mapping[str, Any]:
    containers = pod.get("containers") or []
    if not isinstance(containers, list):
        raise TrainerError(f"runtime {runtime_name}: the node pod's containers must be a list")
    for container in containers:
        if isinstance(container, Mapping) and container.get("name") == NODE:
            return container
    raise TrainerError(f"runtime {runtime_name}: the node job has no container named {NODE!r}")


def plan(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> Plan:
    """Resolve a TrainJob against its (Flux) runtime; one-line errors on bad input."""
    _check_kind(trainjob, ("TrainJob",), "TrainJob")
    _check_kind(runtime, RUNTIME_KINDS, "runtime")
    meta = _mapping(trainjob.get("metadata"), "TrainJob metadata")
    name = meta.get("name")
    if not isinstance(name, str) or dns_label_problem(name):
        raise TrainerError(
            f"TrainJob metadata.name {name!r} must be a DNS label (e.g. lammps-flux)"
        )
    spec = _mapping(trainjob.get("spec"), "TrainJob spec")
    _mapping(meta.get("labels"), "TrainJob labels")  # a mapping, as the API server checks
    screen_trainjob(trainjob)
    screen_runtime(runtime)
    runtime_meta = _mapping(runtime.get("metadata"), "runtime metadata")
    runtime_name = str(runtime_meta.get("name", "?"))
    ref = _mapping(spec.get("runtimeRef"), "spec.runtimeRef")
    if ref.get("name") is not None and ref["name"] != runtime_name:
        raise TrainerError(
            f"TrainJob {name} uses runtime {ref['name']!r} (spec.runtimeRef.name) but the runtime "
            f"given is {runtime_name!r}; pass the runtime it names"
        )
    if ref.get("kind", "ClusterTrainingRuntime") != runtime.get("kind"):
        raise TrainerError(
            f"TrainJob {name} refers to a {ref.get('kind', 'ClusterTrainingRuntime')} but the runtime "
            f"given is a {runtime.get('kind')}; set spec.runtimeRef.kind to match"
        )
    trainer = _mapping(spec.get("trainer"), "spec.trainer")
    policy = _ml_policy(runtime)
    flux = _mapping(policy.get("flux"), "spec.mlPolicy.flux")

    template = _mapping(
        _mapping(runtime.get("spec"), "runtime spec").get("template"), "spec.template"
    )
    jobset_spec = copy.deepcopy(dict(_mapping(template.get("spec"), "spec.template.spec")))
    index = _node_job(jobset_spec, runtime_name)
    pod = _pod_spec(jobset_spec["replicatedJobs"][index], runtime_name)
    container = _node_container(pod, runtime_name)
    for init in pod.get("initContainers") or []:
        if isinstance(init, Mapping) and init.get("name") == INSTALLER:
            raise TrainerError(
                f"runtime {runtime_name}: init container {INSTALLER!r} is reserved for the Flux "
                "install; rename it"
            )
    network = _mapping(jobset_spec.get("network"), "spec.template.spec.network")
    if network.get("enableDNSHostnames") is False:
        raise TrainerError(
            f"runtime {runtime_name}: network.enableDNSHostnames is false, but Flux brokers find "
            "each other by host name; remove it"
        )

    nodes = (
        _count(trainer.get("numNodes"), "spec.trainer.numNodes", MAX_NODES)
        or _count(policy.get("numNodes"), "runtime spec.mlPolicy.numNodes", MAX_NODES)
        or 1
    )
    procs = (
        _count(trainer.get("numProcPerNode"), "spec.trainer.numProcPerNode", MAX_CORES_PER_NODE)
        or _count(
            flux.get("numProcPerNode"),
            "runtime spec.mlPolicy.flux.numProcPerNode",
            MAX_CORES_PER_NODE,
        )
        or 1
    )
    command = _words(trainer.get("command"), "spec.trainer.command")
    if command is None:
        command = _words(container.get("command"), "runtime node container command")
    args = _words(trainer.get("args"), "spec.trainer.args")
    if args is None:
        args = _words(container.get("args"), "runtime node container args")
    argv = [*(command or []), *(args or [])]
    if argv and argv[0] == "flux":
        raise TrainerError(
            f"spec.trainer.command starts with flux ({' '.join(argv[:3])} ...); give the program "
            "itself: fluxhop runs it with flux run -N -n"
        )
    resources_from = "spec.trainer.resourcesPerNode"
    resources = dict(_mapping(trainer.get(resources_from.rpartition(".")[2]), resources_from))
    if not resources:
        resources_from = "runtime node container resources"
        resources = dict(_mapping(container.get("resources"), resources_from))
    settings = dict(DEFAULTS)
    settings.update(_literal_env(container.get("env"), "runtime node container env"))
    settings.update(_literal_env(trainer.get("env"), "spec.trainer.env"))
    image = trainer.get("image") or container.get("image")
    if not image:
        raise TrainerError("no image: set spec.trainer.image or the runtime node container image")
    _check_images(trainer, jobset_spec, runtime_name)
    env = upsert_env(list(container.get("env") or []), list(trainer.get("env") or []))
    gpu_resource, gpus = _gpus(resources, resources_from)
    subdomain = network.get("subdomain") or name
    if dns_label_problem(subdomain):
        raise TrainerError(
            f"runtime network.subdomain {subdomain!r} {dns_label_problem(subdomain)}"
        )
    return Plan(
        name=name,
        namespace=str(meta.get("namespace") or "default"),
        uid=meta.get("uid"),
        nodes=nodes,
        procs_per_node=procs,
        gpu_resource=gpu_resource,
        gpus_per_node=gpus,
        argv=argv,
        image=str(image),
        env=env,
        resources=resources,
        settings=settings,
        subdomain=subdomain,
        jobset_spec=jobset_spec,
        jobset_meta=copy.deepcopy(
            dict(_mapping(template.get("metadata"), "spec.template.metadata"))
        ),
        node_job=index,
        suspend=_suspend(spec.get("suspend"), name),
    )


def _check_images(trainer: Mapping[str, Any], jobset_spec: Mapping[str, Any], runtime: str) -> None:
    """Every image reference the JobSet will carry, named by its path."""
    found = [("spec.trainer.image", trainer.get("image"))]
    for i, job in enumerate(jobset_spec.get("replicatedJobs") or []):
        pod = _pod_spec(job, runtime)
        for section in ("initContainers", "containers"):
            for j, container in enumerate(pod.get(section) or []):
                path = (
                    f"runtime {runtime}: spec.template.spec.replicatedJobs[{i}].template.spec."
                    f"template.spec.{section}[{j}].image"
                )
                found.append((path, container.get("image")))
    for path, image in found:
        problem = image is not None and image_problem(str(image))
        if problem:
            raise TrainerError(f"{path} {shown(str(image))} {problem}")


def _suspend(value: Any, name: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TrainerError(f"TrainJob {name}: spec.suspend must be true or false, not {value!r}")
    return value


def _setting_problem(name: str, value: str) -> str | None:
    """What is wrong with one of the plugin's FLUX_* settings, if anything."""
    if name == "FLUX_VIEW_IMAGE":
        if not value:
            return "is empty; set it to a flux-view image matching the app's OS"
        return image_problem(value)
    if name == "FLUX_NETWORK_DEVICE" and (not value or any(c in value for c in " /:\"'")):
        return "is not an interface name (e.g. eth0)"
    if name == "FLUX_QUEUE_POLICY" and value not in QUEUE_POLICIES:
        return f"must be one of {', '.join(QUEUE_POLICIES)}"
    return None
