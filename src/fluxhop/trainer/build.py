"""``build(trainjob, runtime)``: a TrainJob on a Flux runtime as the objects
Kubeflow Trainer's Flux plugin would create - the JobSet, the ConfigMap
``<job>-flux-entrypoint`` and the Secret ``<job>-flux-curve`` - built from
fluxhop's own bootstrap (broker.toml, R, hostlist, pod scripts), so that a
TrainJob and a MiniCluster run the same, tested scripts.

Deliberate differences from the plugin (each is tested):

* rank 0 exits with the job's exit code (the plugin's pods always exit 0);
* the job's argv reaches ``flux run`` word for word (the plugin joined
  command and args into one string and let the shell split it again);
* ``/dev/shm`` is writable;
* missing ``trainer``/``numNodes``/``numProcPerNode`` fall back instead of
  crashing; a custom JobSet subdomain is used in host names and broker URIs;
* ``-g`` is GPUs per *task* (the plugin passed GPUs per node);
* the CURVE key is random (the plugin derived it from the TrainJob's UID,
  which anyone who can read the TrainJob can do too); it is generated here
  and a re-apply through fluxhop keeps the Secret that already exists;
* the ConfigMap also carries broker.toml, R and the hostlist, so the
  installer only copies the Flux view (the plugin's init.sh appended to
  broker.toml and broke on a re-run).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fluxhop.errors import SpecError, clipped
from fluxhop.flux.curve import CurveCert
from fluxhop.render import bundle_for
from fluxhop.render.objects import common_labels, config_map, curve_secret, owner_reference
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.screen import in_terms
from fluxhop.trainer.errors import TrainerError
from fluxhop.trainer.jobset import FLUX_ROOT, PATHS, config_map_name, flux_jobset
from fluxhop.trainer.plan import API_VERSION, INSTALLER, NODE, Plan, plan, uses_flux

__all__ = ["build", "minicluster_for"]


def _node_container(job: Plan) -> str:
    """The runtime's node container, as a field path of the runtime."""
    jobs = job.jobset_spec.get("replicatedJobs") or []
    pod = jobs[job.node_job].get("template", {}).get("spec", {}).get("template", {})
    containers = pod.get("spec", {}).get("containers") or []
    for index, container in enumerate(containers):
        if isinstance(container, Mapping) and container.get("name") == NODE:
            return (
                f"runtime spec.template.spec.replicatedJobs[{job.node_job}].template.spec"
                f".template.spec.containers[{index}]"
            )
    return "the runtime's node container"  # pragma: no cover - plan() found it


def _field_names(job: Plan, trainjob: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """Where each field of the MiniCluster came from in the TrainJob or its
    runtime, so that an error names the field the user wrote (spec.screen.in_terms)."""
    spec = trainjob.get("spec") if isinstance(trainjob, Mapping) else None
    trainer = spec.get("trainer") if isinstance(spec, Mapping) else None
    trainer = trainer if isinstance(trainer, Mapping) else {}
    node = _node_container(job)

    def source(key: str, runtime_field: str) -> str:
        if trainjob is None:
            return f"spec.trainer.{key} (or {node}.{runtime_field})"
        return f"spec.trainer.{key}" if trainer.get(key) else f"{node}.{runtime_field}"

    return (
        ("spec.containers[0].image", source("image", "image")),
        ("spec.containers[0].command", source("command", "command")),
        *(
            (
                f"spec.containers[0].resources.{part}",
                f"{source('resourcesPerNode', 'resources')}.{part}",
            )
            for part in ("limits", "requests")
        ),
        ("spec.flux.container.image", "FLUX_VIEW_IMAGE"),
        ("spec.flux.networkDevice", "FLUX_NETWORK_DEVICE"),
        ("spec.flux.scheduler.queuePolicy", "FLUX_QUEUE_POLICY"),
        (
            "spec.size",
            "spec.trainer.numNodes"
            if trainer.get("numNodes")
            else "the runtime's spec.mlPolicy.numNodes",
        ),
    )


def minicluster_for(job: Plan, trainjob: Mapping[str, Any] | None = None) -> MiniCluster:
    """The MiniCluster spec that drives the bootstrap bundle for ``job``
    (``trainjob``, when given, says which fields an error names)."""
    container: dict[str, Any] = {"image": job.image}
    if job.argv:
        container["command"] = list(job.argv)
    if job.gpu_resource:
        container["resources"] = {"limits": {job.gpu_resource: job.gpus_per_node}}
    document = {
        "metadata": {"name": job.name, "namespace": job.namespace},
        "spec": {
            "size": job.nodes,
            "tasks": job.tasks,
            "interactive": not job.argv,
            "network": {"headlessName": job.subdomain},
            "flux": {
                "container": {
                    "image": job.settings["FLUX_VIEW_IMAGE"],
                    "name": INSTALLER,
                    "mountPath": FLUX_ROOT,
                    # the plugin's installer copies the view (its init.sh):
                    # a TrainJob does not mount the view image yet
                    "volume": "copy",
                },
                "networkDevice": job.settings["FLUX_NETWORK_DEVICE"],
                "scheduler": {"queuePolicy": job.settings["FLUX_QUEUE_POLICY"]},
            },
            "containers": [container],
        },
    }
    try:
        return MiniCluster.from_dict(document)
    except SpecError as err:
        message = in_terms(str(err), _field_names(job, trainjob))
        raise TrainerError(clipped(f"TrainJob {job.name}: {message}")) from None


def _owner(job: Plan) -> list[dict[str, Any]]:
    if not job.uid:
        return []
    trainjob = {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": job.name, "uid": job.uid},
    }
    return [owner_reference(trainjob)]


def _with_owner(obj: dict[str, Any], owners: list[dict[str, Any]]) -> dict[str, Any]:
    if owners:
        obj["metadata"]["ownerReferences"] = copy.deepcopy(owners)
    return obj


def build(
    trainjob: Mapping[str, Any],
    runtime: Mapping[str, Any],
    *,
    cert: CurveCert | None = None,
    cluster_domain: str = "cluster.local",
) -> list[dict[str, Any]] | None:
    """[ConfigMap, Secret, JobSet] for a TrainJob on a Flux runtime; ``None``
    when the runtime's ML policy is not Flux (torch, mpi, ... are left alone).

    Pure: no I/O. ``cert`` pins the CURVE certificate (else a fresh random one).
    """
    if not uses_flux(runtime):
        return None
    job = plan(trainjob, runtime)
    spec = minicluster_for(job, trainjob)
    try:
        bundle = bundle_for(
            spec,
            "jobset",
            cert=cert,
            cluster_domain=cluster_domain,
            paths=PATHS,
            cores_per_node=job.procs_per_node,
        )
    except SpecError as err:
        raise TrainerError(f"TrainJob {job.name}: {err}") from None
    owners = _owner(job)
    labels = {**job.jobset_meta.get("labels", {}), **common_labels(spec)}
    metadata: dict[str, Any] = {"name": job.name, "namespace": job.namespace, "labels": labels}
    if job.jobset_meta.get("annotations"):
        metadata["annotations"] = dict(job.jobset_meta["annotations"])
    return [
        _with_owner(config_map(spec, bundle, config_map_name(job.name)), owners),
        _with_owner(curve_secret(spec, bundle), owners),
        _with_owner(flux_jobset(job, bundle, metadata), owners),
    ]
