"""The runtime's JobSet with Flux added to its ``node`` job, as the
Kubeflow Trainer Flux plugin shapes it: the same names, volumes, mount paths
and ``flux-installer`` init container (reference §3.2), so tooling written for
the plugin finds everything where it expects, but with ``/dev/shm`` writable
and the job's argv passed through as container args.
"""

from __future__ import annotations

import copy
from typing import Any

from fluxhop.render.bundle import Bundle
from fluxhop.render.pod import VIEW_SOFTWARE_DIR, VIEW_SOFTWARE_SUBPATH
from fluxhop.render.scripts import PodPaths
from fluxhop.trainer.errors import TrainerError
from fluxhop.trainer.plan import INSTALLER, NODE, Plan

__all__ = [
    "FLUX_ROOT",
    "PATHS",
    "config_map_name",
    "curve_secret_name",
    "flux_jobset",
]

FLUX_ROOT = "/mnt/flux"
PATHS = PodPaths(config_dir="/etc/flux-config", curve_dir="/curve", flat=True)
CONFIG_MODE = 0o755  # the plugin's mode; the scripts are run with bash either way
SECRET_MODE = 0o400


def config_map_name(name: str) -> str:
    return f"{name}-flux-entrypoint"


def curve_secret_name(name: str) -> str:
    return f"{name}-flux-curve"


def _volumes(name: str) -> list[dict[str, Any]]:
    return [
        {"name": "flux-install", "emptyDir": {}},
        {
            "name": config_map_name(name),
            "configMap": {"name": config_map_name(name), "defaultMode": CONFIG_MODE},
        },
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {
            "name": "flux-curve",
            "secret": {"secretName": curve_secret_name(name), "defaultMode": SECRET_MODE},
        },
    ]


def _mounts(name: str) -> list[dict[str, Any]]:
    return [
        {"name": "flux-install", "mountPath": FLUX_ROOT},
        # the view's links point into /opt/software: the installer's copy of
        # it, mounted read-only (the plugin's spack-install emptyDir needed a
        # second copy, as root)
        {
            "name": "flux-install",
            "mountPath": VIEW_SOFTWARE_DIR,
            "subPath": VIEW_SOFTWARE_SUBPATH,
            "readOnly": True,
        },
        {"name": config_map_name(name), "mountPath": PATHS.config_dir, "readOnly": True},
        {"name": "flux-curve", "mountPath": PATHS.curve_dir, "readOnly": True},
        # Writable: MPI puts its shared-memory segments here (the plugin mounted it read-only).
        {"name": "shared-memory", "mountPath": "/dev/shm"},
    ]


def _installer(name: str, image: str) -> dict[str, Any]:
    return {
        "name": INSTALLER,
        "image": image,
        "command": ["/bin/bash", f"{PATHS.config_dir}/init.sh"],
        "volumeMounts": [
            {"name": "flux-install", "mountPath": FLUX_ROOT},
            {"name": config_map_name(name), "mountPath": PATHS.config_dir, "readOnly": True},
        ],
    }


def _upsert(
    items: list[dict[str, Any]], added: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """``items`` with ``added`` replacing entries of the same ``key`` (in place) or appended."""
    merged = [copy.deepcopy(item) for item in items]
    for new in added:
        for index, old in enumerate(merged):
            if old.get(key) == new[key]:
                merged[index] = new
                break
        else:
            merged.append(new)
    return merged


def _node_container(plan: Plan, container: dict[str, Any], bundle: Bundle) -> dict[str, Any]:
    container["image"] = plan.image
    container["command"] = ["/bin/bash", f"{PATHS.config_dir}/entrypoint.sh"]
    container.pop("args", None)  # already part of the argv below
    if bundle.container_args:
        container["args"] = list(bundle.container_args)
    if plan.env:
        container["env"] = copy.deepcopy(plan.env)
    if plan.resources:
        container["resources"] = copy.deepcopy(plan.resources)
    container["volumeMounts"] = _upsert(
        container.get("volumeMounts") or [], _mounts(plan.name), "mountPath"
    )
    return container


def _fail_once(spec: dict[str, Any], job_spec: dict[str, Any]) -> None:
    """A failed training command fails the TrainJob once, as fluxhop's own Job
    target does: no pod retries (Kubernetes' default backoffLimit is 6, and a
    retried rank 0 reruns the whole job), no JobSet restarts, and disruptions
    (eviction, preemption) do not count. What the runtime sets itself is kept."""
    job_spec.setdefault("backoffLimit", 0)
    job_spec.setdefault(
        "podFailurePolicy",
        {
            "rules": [
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                }
            ]
        },
    )
    spec.setdefault("failurePolicy", {"maxRestarts": 0})


def flux_jobset(plan: Plan, bundle: Bundle, metadata: dict[str, Any]) -> dict[str, Any]:
    """The runtime's JobSet template with Flux in its ``node`` job."""
    spec = copy.deepcopy(plan.jobset_spec)
    job = spec["replicatedJobs"][plan.node_job]
    job["replicas"] = 1
    if plan.suspend is not None:
        spec["suspend"] = plan.suspend  # as the Trainer's JobSet builder mirrors it
    job_spec = job["template"]["spec"]
    mode = job_spec.get("completionMode", "Indexed")
    if mode != "Indexed":
        raise TrainerError(
            f"the node job has completionMode {mode}; Flux needs Indexed (each pod's index is its rank)"
        )
    job_spec["completionMode"] = "Indexed"
    job_spec["parallelism"] = job_spec["completions"] = plan.nodes
    _fail_once(spec, job_spec)
    pod = job_spec["template"]["spec"]
    # A failed job should end the pod with its exit code, not rerun in place.
    pod.setdefault("restartPolicy", "Never")
    pod["volumes"] = _upsert(pod.get("volumes") or [], _volumes(plan.name), "name")
    pod["initContainers"] = [
        *(pod.get("initContainers") or []),
        _installer(plan.name, plan.settings["FLUX_VIEW_IMAGE"]),
    ]
    pod["containers"] = [
        _node_container(plan, c, bundle) if c.get("name") == NODE else c for c in pod["containers"]
    ]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": spec,
    }
