"""The pod template every MiniCluster pod is made from."""

from __future__ import annotations

from typing import Any

from fluxhop.errors import SpecError
from fluxhop.render.bundle import BROKER_PORT, NODE_NAME_VAR, Bundle, k8s_escape
from fluxhop.render.objects import (
    common_labels,
    config_map_name,
    curve_secret_name,
    lead_state_claim_name,
)
from fluxhop.render.placement import affinity, spread
from fluxhop.render.scripts import CONFIG_DIR, CURVE_DIR
from fluxhop.render.security import (
    cma_environment,
    container_security_context,
    pod_security_context,
)
from fluxhop.spec.leadstate import LEAD_STATE_ANNOTATIONS, LEAD_STATE_DIR
from fluxhop.spec.minicluster import Container, ContainerVolume, MiniCluster

__all__ = [
    "LEAD_CLAIM_ANNOTATION",
    "LEAD_CONTAINER_ANNOTATION",
    "LEAD_STATE_POLICY",
    "LEAD_STATE_VOLUME",
    "pod_template",
]

CONFIG_VOLUME = "fluxhop-config"
CURVE_VOLUME = "fluxhop-curve"
SHM_VOLUME = "fluxhop-shm"
LEAD_STATE_VOLUME = "fluxhop-lead-state"
# spec.leadState's claim is mounted in rank 0's pod alone, and all ranks share
# one pod template: the template names the claim and the Flux container in
# these annotations, and the MutatingAdmissionPolicy LEAD_STATE_POLICY
# (deploy/lead-state.yaml) adds the volume and its mount to the pod of
# completion index 0 as the Job creates it. Kubernetes has no per-index
# volume, and a claim every pod mounts would need ReadWriteMany storage.
LEAD_STATE_POLICY = "fluxhop-lead-state"
LEAD_CLAIM_ANNOTATION = f"{LEAD_STATE_ANNOTATIONS}claim"
LEAD_CONTAINER_ANNOTATION = f"{LEAD_STATE_ANNOTATIONS}container"
# The Flux view's files are links into the Spack tree its image has in
# /opt/software. Mounted (flux.container.volume "image"), the image itself is
# a read-only volume: its view appears at <mountPath>/view and its tree at
# /opt/software, through subPaths, and nothing is copied. Copied ("copy"),
# the init container copies both into the view's emptyDir, and the lead
# container mounts the tree's copy at /opt/software (read-only, whatever
# its user), where the Flux Operator copies it a second time, as root only.
VIEW_SOFTWARE_DIR = "/opt/software"
VIEW_SOFTWARE_SUBPATH = "software"
VIEW_IMAGE_VOLUME = "fluxhop-view"
# where a Flux Operator view image has them (/opt/view links to the view)
VIEW_IN_IMAGE = "opt/views/view"
SOFTWARE_IN_IMAGE = "opt/software"
READ_ONLY_FILES = 0o444
OWNER_READ_ONLY = 0o400
# The Kubernetes node a pod runs on (the downward API), for whoever inside
# must name it (a rabbit's NNF_NODE_NAME, as NNF gives its own containers).
NODE_NAME_ENV = {
    "name": NODE_NAME_VAR,
    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
}
# Rank 0's pod is Ready once its broker is in the run state (the instance is
# up: templates/ready.sh); readiness never restarts a container, so a slow
# quorum costs nothing. Every 2 s: a rabbit's PreRun waits on it.
READINESS_PROBE = {
    "exec": {"command": ["/bin/bash", f"{CONFIG_DIR}/ready.sh"]},
    "periodSeconds": 2,
    "timeoutSeconds": 5,
}


def _env(container: Container, extra: dict[str, str]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": k, "value": v} for k, v in {**extra, **container.environment}.items()
    ]
    for name, ref in container.secrets.items():
        env.append(
            {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        )
    return env


def _resources(container: Container) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if container.resources.limits:
        out["limits"] = {k: str(v) for k, v in container.resources.limits.items()}
    if container.resources.requests:
        out["requests"] = {k: str(v) for k, v in container.resources.requests.items()}
    return out


def _user_volume(name: str, volume: ContainerVolume) -> dict[str, Any]:
    """Pod volume for a ContainerVolume, with the Flux Operator's precedence."""
    if volume.csi_driver:
        csi: dict[str, Any] = {"driver": volume.csi_driver, "readOnly": volume.read_only}
        if volume.csi_driver_attributes:
            csi["volumeAttributes"] = dict(volume.csi_driver_attributes)
        return {"name": name, "csi": csi}
    if volume.secret_name:
        return {"name": name, "secret": {"secretName": volume.secret_name}}
    if volume.empty_dir:
        empty: dict[str, Any] = {}
        if (volume.empty_dir_medium or "").lower() == "memory":
            empty["medium"] = "Memory"
        if volume.empty_dir_size_limit:
            empty["sizeLimit"] = volume.empty_dir_size_limit
        return {"name": name, "emptyDir": empty}
    if volume.host_path:
        return {"name": name, "hostPath": {"path": volume.host_path, "type": "Directory"}}
    if volume.config_map_name:
        config: dict[str, Any] = {"name": volume.config_map_name}
        if volume.items:
            config["items"] = [{"key": k, "path": p} for k, p in volume.items.items()]
        return {"name": name, "configMap": config}
    if volume.claim_name:
        return {
            "name": name,
            "persistentVolumeClaim": {"claimName": volume.claim_name, "readOnly": volume.read_only},
        }
    # A volume with only a path: a scratch directory the pod's containers share.
    return {"name": name, "emptyDir": {}}


def _mount_path(volume: ContainerVolume) -> str:
    # An emptyDir without a path is the Flux Operator's /dev/shm for MPI.
    return volume.path or "/dev/shm"


def _volume_mounts(container: Container) -> list[dict[str, Any]]:
    return [
        {"name": name, "mountPath": _mount_path(volume), "readOnly": volume.read_only}
        for name, volume in container.volumes.items()
    ]


def _flux_mounts(spec: MiniCluster) -> list[dict[str, Any]]:
    """Flux's directory (its config, run and state: an emptyDir), with the
    view in it when mounted from its image, and the pod's config."""
    view = spec.spec.flux.container
    mounts: list[dict[str, Any]] = [{"name": view.name, "mountPath": view.mount_path}]
    if spec.spec.flux.container.mounted:
        mounts.append({"name": VIEW_IMAGE_VOLUME, "mountPath": f"{view.mount_path}/view",
                       "subPath": VIEW_IN_IMAGE, "readOnly": True})  # fmt: skip
    mounts.append({"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True})
    return mounts


def _software_mount(spec: MiniCluster) -> dict[str, Any]:
    """The view's Spack tree at /opt/software: the image's, or the copy's."""
    if spec.spec.flux.container.mounted:
        return {"name": VIEW_IMAGE_VOLUME, "mountPath": VIEW_SOFTWARE_DIR,
                "subPath": SOFTWARE_IN_IMAGE, "readOnly": True}  # fmt: skip
    return {"name": spec.spec.flux.container.name, "mountPath": VIEW_SOFTWARE_DIR,
            "subPath": VIEW_SOFTWARE_SUBPATH, "readOnly": True}  # fmt: skip


def _lifecycle(container: Container) -> dict[str, Any] | None:
    hooks: dict[str, Any] = {}
    if container.life_cycle.post_start_exec:
        hooks["postStart"] = {
            "exec": {"command": ["/bin/sh", "-c", container.life_cycle.post_start_exec]}
        }
    if container.life_cycle.pre_stop_exec:
        hooks["preStop"] = {
            "exec": {"command": ["/bin/sh", "-c", container.life_cycle.pre_stop_exec]}
        }
    return hooks or None


def _container_common(spec: MiniCluster, container: Container) -> dict[str, Any]:
    out: dict[str, Any] = {"image": container.image}
    policy = container.pull_policy()
    if policy:
        out["imagePullPolicy"] = policy
    if container.working_dir:
        out["workingDir"] = container.working_dir
    resources = _resources(container)
    if resources:
        out["resources"] = resources
    security = container_security_context(spec, container.security_context)
    if security:
        out["securityContext"] = security
    lifecycle = _lifecycle(container)
    if lifecycle:
        out["lifecycle"] = lifecycle
    return out


def _flux_container(spec: MiniCluster, bundle: Bundle) -> dict[str, Any]:
    lead = spec.spec.flux_container
    out = {"name": spec.name, **_container_common(spec, lead)}
    out["command"] = ["/bin/bash", f"{CONFIG_DIR}/entrypoint.sh"]
    if bundle.container_args:
        out["args"] = list(bundle.container_args)
    # first: the variables after it may name it, $(FLUXHOP_NODE_NAME)
    out["env"] = [
        NODE_NAME_ENV,
        *_env(lead, {**cma_environment(spec), **spec.spec.flux.environment}),
    ]
    named = {BROKER_PORT: "flux-broker"}
    if spec.spec.serves_metrics:  # rank 0 serves it; every pod has one template
        named[spec.spec.metrics.port] = "metrics"
    out["ports"] = _ports(lead, named)
    mounts = [*_flux_mounts(spec), {"name": CURVE_VOLUME, "mountPath": CURVE_DIR, "readOnly": True}]
    if not spec.spec.flux.container.disable:
        mounts.append(_software_mount(spec))
    user = _volume_mounts(lead)
    if not any(m["mountPath"] == "/dev/shm" for m in user):
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    lead_state = spec.spec.lead_state
    if lead_state is not None and lead_state.empty_dir:  # a claim: LEAD_STATE_POLICY mounts it
        mounts.append({"name": LEAD_STATE_VOLUME, "mountPath": LEAD_STATE_DIR})
    out["volumeMounts"] = mounts + user
    out["readinessProbe"] = READINESS_PROBE
    # keep keys in a stable, readable order
    return out


def _ports(container: Container, named: dict[int, str]) -> list[dict[str, Any]]:
    """The ``named`` ports first, then the container's own, each once; a
    port in ``hostPorts`` is published on the node under the same number."""
    numbers = [*named, *container.ports, *container.host_ports]
    ports = []
    for number in dict.fromkeys(numbers):  # in order, each once
        port: dict[str, Any] = {"name": named[number]} if number in named else {}
        port["containerPort"] = number
        if number in container.host_ports:
            port["hostPort"] = number
        port["protocol"] = "TCP"
        ports.append(port)
    return ports


def _sidecar(spec: MiniCluster, container: Container) -> dict[str, Any]:
    out: dict[str, Any] = {"name": container.name, **_container_common(spec, container)}
    if container.command:
        out["command"] = [k8s_escape(word) for word in container.command]
    env = _env(container, {})
    if env:
        out["env"] = env
    ports = _ports(container, {})
    if ports:
        out["ports"] = ports
    out["volumeMounts"] = [*_flux_mounts(spec), *_volume_mounts(container)]
    return out


def _pull_policy(spec: MiniCluster) -> str:
    return "Always" if spec.spec.flux.container.pull_always else "IfNotPresent"


def _init_container(spec: MiniCluster) -> dict[str, Any]:
    """The view copied (flux.container.volume "copy")."""
    view = spec.spec.flux.container
    out: dict[str, Any] = {
        "name": view.name,
        "image": view.image,
        "imagePullPolicy": _pull_policy(spec),
        "command": ["/bin/bash", f"{CONFIG_DIR}/init.sh"],
        "volumeMounts": _flux_mounts(spec),
    }
    if view.working_dir:
        out["workingDir"] = view.working_dir
    limits = {k: str(v) for k, v in view.resources.limits.items()}
    requests = {k: str(v) for k, v in view.resources.requests.items()}
    if limits or requests:
        out["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    security = container_security_context(spec, view.security_context)
    if security:
        out["securityContext"] = security
    return out


def _volumes(spec: MiniCluster, bundle: Bundle) -> list[dict[str, Any]]:
    view = spec.spec.flux.container
    volumes: list[dict[str, Any]] = [
        {"name": view.name, "emptyDir": {}},
        {
            "name": CONFIG_VOLUME,
            "configMap": {
                "name": config_map_name(spec),
                "defaultMode": READ_ONLY_FILES,
                "items": [{"key": key, "path": path} for key, path in bundle.config_paths.items()],
            },
        },
        {
            "name": CURVE_VOLUME,
            "secret": {"secretName": curve_secret_name(spec), "defaultMode": OWNER_READ_ONLY},
        },
    ]
    if spec.spec.flux.container.mounted:
        volumes.append({"name": VIEW_IMAGE_VOLUME,
                        "image": {"reference": view.image, "pullPolicy": _pull_policy(spec)}})  # fmt: skip
    lead_mounts = _volume_mounts(spec.spec.flux_container)
    if not any(m["mountPath"] == "/dev/shm" for m in lead_mounts):
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}})
    lead_state = spec.spec.lead_state
    if lead_state is not None and lead_state.empty_dir:
        volumes.append({"name": LEAD_STATE_VOLUME, "emptyDir": {}})
    reserved = {v["name"] for v in volumes} | {LEAD_STATE_VOLUME, VIEW_IMAGE_VOLUME}
    seen: set[str] = set()
    for container in spec.spec.containers:
        for name, volume in container.volumes.items():
            if name in reserved:
                raise SpecError(
                    f"volume name {name!r} is used by fluxhop itself; rename the volume"
                )
            if name not in seen:
                seen.add(name)
                volumes.append(_user_volume(name, volume))
    return volumes


def _lead_claim_annotations(spec: MiniCluster) -> dict[str, str]:
    """What LEAD_STATE_POLICY reads to mount spec.leadState's claim in rank 0's pod."""
    claim = lead_state_claim_name(spec)
    if claim is None:
        return {}
    return {LEAD_CLAIM_ANNOTATION: claim, LEAD_CONTAINER_ANNOTATION: spec.name}


def pod_template(spec: MiniCluster, bundle: Bundle, *, subdomain: str | None) -> dict[str, Any]:
    """The pod template; ``subdomain`` is None when the workload sets it (JobSet)."""
    pod = spec.spec.pod
    labels = {**pod.labels, **common_labels(spec), "app.kubernetes.io/name": spec.name}
    template_meta: dict[str, Any] = {"labels": labels}
    annotations = {**pod.annotations, **_lead_claim_annotations(spec)}
    if annotations:
        template_meta["annotations"] = annotations
    body: dict[str, Any] = {"restartPolicy": "Never"}
    if subdomain:
        body["subdomain"] = subdomain
    if spec.spec.flux.container.copied:
        body["initContainers"] = [_init_container(spec)]
    body["containers"] = [
        _flux_container(spec, bundle),
        *(_sidecar(spec, c) for c in spec.spec.sidecars),
    ]
    body["volumes"] = _volumes(spec, bundle)
    secrets = sorted({c.image_pull_secret for c in spec.spec.containers if c.image_pull_secret})
    if secrets:
        body["imagePullSecrets"] = [{"name": s} for s in secrets]
    optional = {
        "serviceAccountName": pod.service_account_name,
        # Brokers never call the API server: no token unless the spec asks for one.
        "automountServiceAccountToken": (
            False
            if pod.automount_service_account_token is None
            else pod.automount_service_account_token
        ),
        "schedulerName": pod.scheduler_name,
        "runtimeClassName": pod.runtime_class_name,
        "dnsPolicy": pod.dns_policy,
        "nodeSelector": dict(pod.node_selector) or None,
        "tolerations": [t.model_dump(by_alias=True, exclude_none=True) for t in pod.tolerations]
        or None,
        "priorityClassName": pod.priority_class_name,
        "affinity": affinity(spec),
        "topologySpreadConstraints": spread(spec),
        "securityContext": pod_security_context(spec),
        "hostIPC": pod.host_ipc or None,
        "hostPID": pod.host_pid or None,
        "shareProcessNamespace": spec.spec.share_process_namespace or None,
    }
    body.update({key: value for key, value in optional.items() if value is not None})
    return {"metadata": template_meta, "spec": body}
