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

from fluxhop.errors import SpecError
from fluxhop.flux.curve import CurveCert
from fluxhop.render import bundle_for
from fluxhop.render.objects import common_labels, config_map, curve_secret, owner_reference
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.trainer.errors import TrainerError
from fluxhop.trainer.jobset import FLUX_ROOT, PATHS, config_map_name, flux_jobset
from fluxhop.trainer.plan import API_VERSION, INSTALLER, Plan, plan, uses_flux

__all__ = ["build", "minicluster_for"]


def minicluster_for(job: Plan) -> MiniCluster:
    """The MiniCluster spec that drives the bootstrap bundle for ``job``."""
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
        raise TrainerError(f"TrainJob {job.name}: {err}") from None


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
    spec = minicluster_for(job)
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
