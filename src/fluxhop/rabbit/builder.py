"""A rabbit MPI request, placed on rabbits, as a :class:`MiniCluster` spec.

Everything is built fresh per call from the request (a frozen value), so no
defaults are shared between jobs, and the document goes through
:meth:`MiniCluster.from_dict`, the same validation a user's YAML gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fluxhop.errors import SHOWN, SpecError, shown
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.placement import choose_rabbits
from fluxhop.rabbit.storage import RabbitVolume, directories_variable
from fluxhop.rabbit.workflow import Workflow
from fluxhop.render import Target, pod_host_prefix
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.rules import env_name_problem
from fluxhop.spec.screen import in_terms

if TYPE_CHECKING:
    from fluxhop.rabbit.request import RabbitRequest

__all__ = ["ALWAYS_SUCCEED", "RABBIT_NODE_LABEL", "rabbit_minicluster"]

RABBIT_NODE_LABEL = "cray.nnf.node"
ALWAYS_SUCCEED = "always-succeed"
# What NNF grants MPI workers in user containers, with everything else dropped.
CAPABILITIES = ["NET_BIND_SERVICE", "SYS_CHROOT", "AUDIT_WRITE", "SETUID", "SETGID"]
HOST_DIRECTORIES = {"devices": "/sys/devices", "net": "/sys/class/net"}  # Slingshot/CXI


def _identity(uid: int, gid: int) -> dict[str, Any]:
    for value, what in ((uid, "uid"), (gid, "gid")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RabbitError(f"the job owner's {what} must be a number 0 or more, not {value!r}")
    identity: dict[str, Any] = {"runAsUser": uid, "runAsGroup": gid}
    if uid != 0:
        identity["runAsNonRoot"] = True
    return identity


def _volumes(
    request: RabbitRequest, workflow: Workflow | None, storage: Sequence[RabbitVolume]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Container volumes and the DW_* variables that announce them: each
    file system from where NNF mounted it on the rabbit, in the container at
    that same path (as NNF's own containers have it) unless the job asked
    for rabbit_mount (one at the path, several in a directory each); a
    global Lustre one through its claim, at its mount root."""
    volumes: dict[str, Any] = {
        name: {"hostPath": path, "path": path} for name, path in HOST_DIRECTORIES.items()
    }
    env: dict[str, str] = {}
    if workflow is None:
        return volumes, env
    env["DW_WORKFLOW_NAME"] = workflow.name
    env["DW_WORKFLOW_NAMESPACE"] = workflow.namespace
    on_rabbits = [v for v in storage if v.claim is None]
    claims: list[str] = []  # one volume per claim: two paths of one Lustre share its root
    for volume in storage:
        if volume.claim is not None:  # global Lustre: its claim, at its root, as everywhere
            if volume.claim not in claims:
                claims.append(volume.claim)
                volumes[f"global-{len(claims) - 1}"] = {
                    "claimName": volume.claim,
                    "path": volume.mount_path,
                }
            env[volume.env_name] = volume.mount_path
            continue
        if request.rabbit_mount is None:
            mount = volume.mount_path
        elif len(on_rabbits) == 1:
            mount = request.rabbit_mount
        else:
            mount = f"{request.rabbit_mount.rstrip('/')}/{volume.name}"
        volumes[volume.volume_name] = {"hostPath": volume.mount_path, "path": mount}
        env[volume.env_name] = mount
        directories = directories_variable(volume)
        if directories:
            env[directories[0]] = directories[1]
    return volumes, env


def _peers(
    name: str, namespace: str, size: int, target: Target | str, domain: str
) -> dict[str, str]:
    """What NNF tells its own containers of their peers (nnf-sos'
    ``addEnvVars``): the pods' subdomain (the headless Service, named as the
    MiniCluster), its domain, and every pod's host name, rank order and
    comma-separated, as NNF lists an MPI job's launcher and workers."""
    prefix = pod_host_prefix(name, target)
    return {
        "NNF_CONTAINER_SUBDOMAIN": name,
        "NNF_CONTAINER_DOMAIN": f"{namespace}.svc.{domain}",
        "NNF_CONTAINER_HOSTNAMES": ",".join(f"{prefix}{rank}" for rank in range(size)),
    }


def _environment(request: RabbitRequest, system: dict[str, str]) -> dict[str, str]:
    for key in request.env:
        problem = env_name_problem(key)
        if problem:
            written = key if key.isprintable() and len(key) <= SHOWN else shown(key)
            raise RabbitError(f"rabbit.mpi.env.{written}: {problem}")
    clash = sorted(set(system) & set(request.env))
    if clash:
        raise RabbitError(
            f"rabbit.mpi.env.{clash[0]} is set by the workflow itself; use another variable name"
        )
    return {**request.env, **system}


# Where each field of the MiniCluster came from in the job's request, so that
# an error names the attribute the job set (rabbit.mpi.image), not a spec path
# it never wrote (spec.screen.in_terms); `fluxhop hop` names its flags for them.
_ATTRIBUTE_OF = (
    ("spec.containers[0].image", "rabbit.mpi.image"),
    ("spec.containers[0].workingDir", "rabbit.mpi.workdir"),
    ("spec.containers[0].command", "rabbit.mpi.command"),
    ("spec.containers[0].environment", "rabbit.mpi.env"),
    ("spec.containers[0].imagePullSecret", "rabbit.mpi.pull_secret"),
    ("spec.containers[0].imagePullPolicy", "rabbit.mpi.pull_policy"),
    ("spec.containers[0].resources.limits", "cxi_resource"),
    ("spec.containers[0].resources.requests", "cxi_resource"),
    ("spec.containers[0].volumes", "rabbit.mpi.rabbit_mount"),
    ("spec.tasks", "rabbit.mpi.tasks"),
)


def _names(workflow: Workflow | None, name: str, namespace: str) -> tuple[tuple[str, str], ...]:
    """What to call the MiniCluster's name and namespace in an error: the
    Workflow's metadata when they are the Workflow's, else the arguments."""
    named = "name"
    if workflow is not None and name == workflow.name:
        named = "the Workflow's metadata.name"
    spaced = "namespace"
    if workflow is not None and namespace == workflow.namespace:
        spaced = "the Workflow's metadata.namespace"
    return (
        ("spec.containers[0].name", named),
        ("metadata.name", named),
        ("metadata.namespace", spaced),
        *_ATTRIBUTE_OF,
    )


def rabbit_minicluster(
    request: RabbitRequest,
    rabbits: Iterable[str],
    *,
    name: str,
    namespace: str,
    uid: int,
    gid: int,
    workflow: Workflow | Mapping[str, Any] | None,
    storage: Sequence[RabbitVolume] = (),
    cxi_resource: str | None,
    target: Target | str = Target.JOB,
    cluster_domain: str = "cluster.local",
) -> MiniCluster:
    """The MiniCluster ``request`` asks for on (some of) ``rabbits``; with a
    Workflow, its file systems (``storage``) mounted and announced, and the
    ``NNF_CONTAINER_*`` variables NNF would give its own containers, for the
    pods ``target`` makes in a cluster whose DNS domain is ``cluster_domain``."""
    if not request.enabled:
        raise RabbitError("the job does not ask for a rabbit MiniCluster (set -S rabbit.mpi=true)")
    if workflow is not None and not isinstance(workflow, Workflow):
        workflow = Workflow.from_object(workflow)
    chosen = choose_rabbits(rabbits, request.rabbits, request.nodes)
    identity = _identity(uid, gid)
    volumes, system_env = _volumes(request, workflow, storage)
    if workflow is not None:
        system_env.update(_peers(name, namespace, len(chosen), target, cluster_domain))
        system_env.update(workflow.ports)
        if target != Target.MINICLUSTER:  # fluxhop's own pods name their node
            system_env["NNF_NODE_NAME"] = "$(FLUXHOP_NODE_NAME)"
    container: dict[str, Any] = {
        "name": name,
        "image": request.image,
        "environment": _environment(request, system_env),
        "volumes": volumes,
        "securityContext": {
            **identity,
            "privileged": False,
            "capabilities": {"add": list(CAPABILITIES), "drop": ["ALL"]},
        },
    }
    host_ports = workflow.port_numbers() if workflow is not None else []
    if host_ports and target != Target.MINICLUSTER:
        # published on each rabbit, as NNF publishes them on its launcher's
        # node; the Flux Operator's CRD has no place for them
        container["hostPorts"] = host_ports
    if cxi_resource is not None:  # None: a system without the CXI device plugin (no Slingshot)
        container["resources"] = {"limits": {cxi_resource: 1}, "requests": {cxi_resource: 1}}
    if request.command:
        container["command"] = list(request.command)
    if request.workdir:
        container["workingDir"] = request.workdir
    if request.pull_policy:
        container["imagePullPolicy"] = request.pull_policy
    if request.pull_secret:
        container["imagePullSecret"] = request.pull_secret
    flux: dict[str, Any] = {"container": {"securityContext": dict(identity)}}
    if not request.adds_flux:
        flux["container"]["disable"] = True
    if request.exclusive:
        flux["optionFlags"] = "--exclusive"
    spec: dict[str, Any] = {
        "size": len(chosen),
        "maxSize": len(chosen),
        "tasks": request.tasks or len(chosen),
        "interactive": request.interactive,
        "containers": [container],
        "flux": flux,
        "pod": {
            "nodeSelector": {RABBIT_NODE_LABEL: "true"},
            "nodeAffinity": {"kubernetes.io/hostname": list(chosen)},
            "tolerations": [
                {
                    "key": RABBIT_NODE_LABEL,
                    "operator": "Equal",
                    "value": "true",
                    "effect": "NoSchedule",
                }
            ],
            "securityContext": {
                **identity,
                "fsGroup": gid,
                "fsGroupChangePolicy": "OnRootMismatch",
            },
        },
    }
    if target != Target.MINICLUSTER:  # the Flux Operator's CRD has no place for it
        spec["pod"]["podsPerNode"] = 1  # one broker per rabbit, as NNF runs one pod on each
    if request.succeed:
        spec["jobLabels"] = {ALWAYS_SUCCEED: "1"}
    document = {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    try:
        return MiniCluster.from_dict(document)
    except SpecError as err:
        message = in_terms(str(err), _names(workflow, name, namespace))
        if message.startswith("the Workflow's"):
            message += " (the MiniCluster is named after its Workflow)"
        raise RabbitError(message) from None  # cut short there when huge
