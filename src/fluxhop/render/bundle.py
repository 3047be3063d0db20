"""The Flux bootstrap bundle of a MiniCluster, independent of the workload kind.

Given the host names the pods will really have (an Indexed Job names them
``<name>-<i>``, a JobSet ``<name>-node-0-<i>``), this computes everything the
brokers need: ``broker.toml``, R, the hostlist, the certificate, the pod
scripts and the entrypoint's argv. Kubernetes objects are built around it by
the target modules; the local backend rewrites only what must differ on one
host.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.flux.broker import CORES_AS_SLOTS, BrokerConfig
from fluxhop.flux.curve import CurveCert
from fluxhop.flux.resources import ResourceSet
from fluxhop.render.scripts import (
    METRICS_FILES,
    EntrypointParams,
    HealthParams,
    PodPaths,
    connect_script,
    entrypoint_script,
    health_checks_library,
    health_once_script,
    health_script,
    init_script,
    metrics_program,
    node_env_rc,
    ready_script,
)
from fluxhop.spec.health import REASON_PREFIX
from fluxhop.spec.leadstate import LEAD_STATE_DIR
from fluxhop.spec.metrics import BROKER_PORT
from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "BROKER_PORT",
    "NODE_NAME_VAR",
    "Bundle",
    "Layout",
    "build_bundle",
    "flux_run_args",
    "k8s_escape",
    "node_local_names",
]

DEFAULT_TOPOLOGY = "kary:256"  # the Flux Operator's -Stbon.fanout=256
DEFAULT_PATHS = PodPaths()
COMMAND_FILES = ("init", "pre", "broker_pre", "worker_pre", "post", "script")
# The Kubernetes node a pod runs on, in every Flux container fluxhop renders
# (render/pod.py gives it from the downward API).
NODE_NAME_VAR = "FLUXHOP_NODE_NAME"
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Layout:
    """Where the pods live: their host names and how peers resolve them."""

    host_prefix: str
    subdomain: str
    namespace: str
    cluster_domain: str = "cluster.local"

    def hostlist(self, count: int) -> str:
        """The ``count`` host names as one RFC 29 hostlist, e.g. ``demo-[0-3]``."""
        return f"{self.host_prefix}0" if count == 1 else f"{self.host_prefix}[0-{count - 1}]"

    def peer(self, rank: int) -> str:
        """The DNS name the brokers reach ``rank`` by."""
        return (
            f"{self.host_prefix}{rank}.{self.subdomain}.{self.namespace}.svc.{self.cluster_domain}"
        )

    def connect_template(self) -> str:
        # Peers resolve only as <host>.<subdomain>..., never by bare host name.
        return f"tcp://%h.{self.subdomain}.{self.namespace}.svc.{self.cluster_domain}:%p"


@dataclass(frozen=True)
class Bundle:
    hostlist: str
    broker: BrokerConfig
    resources: ResourceSet | None
    cert: CurveCert
    config_files: dict[str, str] = field(default_factory=dict)  # ConfigMap key -> text
    config_paths: dict[str, str] = field(default_factory=dict)  # ConfigMap key -> mounted path
    container_args: list[str] = field(default_factory=list)


def k8s_escape(word: str) -> str:
    """Protect a command word from Kubernetes' ``$(VAR)`` expansion.

    The kubelet expands ``$(VAR)`` in command and args and reduces ``$$`` to
    ``$``; doubling every ``$`` makes the container receive the word exactly.
    """
    return word.replace("$", "$$")


def flux_run_args(spec: MiniCluster, *, counted_cores: bool = False) -> list[str]:
    """``flux run`` flags for the job rank 0 runs, then optionFlags.

    ``counted_cores``: R's cores are a count fluxhop wrote (a CPU request,
    Kubeflow Trainer's numProcPerNode, or the local ranks that share one
    host), not CPUs the broker found. Flux's default cpu-affinity binds the
    tasks to them: to the first CPUs of a shared node, the same ones for
    every pod or local rank on it. So the tasks are not bound
    (``-o cpu-affinity=off``), which is what binding to them gives where the
    pod's cpuset is exactly its CPUs (the kubelet's static CPU manager); an
    optionFlags ``-o cpu-affinity=...`` comes later and wins.

    The job owns every resource of its nodes: it asks for whole nodes
    (``--exclusive``), so every core and every GPU that R declares on them is
    allocated to it whatever the ratio of tasks to GPUs. Computing ``-g`` per
    task instead rounds 1 GPU over 2 tasks per node down to 0, and flux-core's
    shell then sets ``CUDA_VISIBLE_DEVICES=-1`` for a job allocated no GPU.
    Which of the job's GPUs a task sees is Flux's own ``gpu-affinity`` shell
    option: all of the node's by default, split with ``-o gpu-affinity=per-task``
    (and cores likewise with ``cpu-affinity``). ``-c``/``-g`` given by the user
    in optionFlags still shape the slots.

    Fewer tasks than nodes gives each task a node of its own (``-N tasks``):
    Flux refuses more nodes than tasks.
    """
    body = spec.spec
    extra = body.flux.option_words()
    if body.tasks == 0:  # the operator's "-N size" alone: Flux makes it exclusive itself
        args = ["-N", str(body.size)]
    else:
        nodes = min(body.size, body.ntasks)
        args = ["-N", str(nodes), "-n", str(body.ntasks)]
        if not {"--exclusive", "-x"} & set(extra):
            args.append("--exclusive")
    if counted_cores:
        args += ["-o", "cpu-affinity=off"]
    if body.logging.debug:
        args.append("-vvv")
    return args + extra


def _broker_args(spec: MiniCluster) -> list[str]:
    body = spec.spec
    level = 0 if body.logging.quiet else body.flux.log_level
    args = [f"-Slog-stderr-level={level}", "-Slog-stderr-mode=local"]
    if body.min_size is not None:
        args.append(f"-Sbroker.quorum={body.min_size}")
    elif body.size < body.max_nodes:
        args.append(f"-Sbroker.quorum={body.size}")
    if body.logging.zeromq:
        args.append("-Stbon.zmqdebug=1")
    return args


def node_local_names(spec: MiniCluster) -> list[str]:
    """The Flux container's variables whose value differs from pod to pod:
    the node's name and every variable defined from one of them,
    ``$(FLUXHOP_NODE_NAME)`` (a rabbit's NNF_NODE_NAME) or ``$(NNF_NODE_NAME)``.
    A job's tasks get their own pod's values of these (templates/node-env.lua);
    every other variable is the submitter's. A name that is no shell name
    cannot be passed on (the entrypoint is bash): said, and left out."""
    body = spec.spec
    environment = {**body.flux.environment, **body.flux_container.environment}
    local = [NODE_NAME_VAR]
    grown = True
    while grown:  # until no variable names one found so far
        found = [name for name, value in environment.items() if name not in local
                 and any(f"$({known})" in value for known in local)]  # fmt: skip
        local += found
        grown = bool(found)
    for name in [n for n in local if not SHELL_NAME.fullmatch(n)]:
        warnings.warn(
            f"environment variable {name} differs from pod to pod, but it is no shell name: a job's "
            "tasks get rank 0's value (name it with letters, digits and _)",
            FluxhopWarning,
            stacklevel=3,
        )
        local.remove(name)
    return local


def _add_health(
    spec: MiniCluster, paths: PodPaths, gpus: int, files: dict[str, str], where: dict[str, str]
) -> None:
    """spec.health's runner, the shipped checks, and each check's command."""
    health = spec.spec.health
    if health is None:
        return
    if paths.flat:
        raise SpecError("spec.health needs the nested ConfigMap layout (not a Trainer runtime's)")
    checks = health.checks
    files["health.sh"] = health_script(HealthParams(
        name=spec.name, names=[c.name for c in checks], kinds=[c.kind for c in checks],
        intervals=[c.interval_seconds for c in checks],
        timeouts=[c.timeout_seconds for c in checks],
        gpus_per_node=gpus, reason_prefix=REASON_PREFIX, config_dir=paths.config_dir,
    ))  # fmt: skip
    files["health-once.sh"] = health_once_script(spec.name)
    files["health-checks.sh"] = health_checks_library()
    for key in ("health.sh", "health-once.sh", "health-checks.sh"):
        where[key] = key
    for check in checks:
        command = check.command if check.command.endswith("\n") else check.command + "\n"
        files[f"health.{check.name}.sh"] = command
        where[f"health.{check.name}.sh"] = f"health/{check.name}.sh"


def _cores_per_node(spec: MiniCluster) -> int | None:
    cpu = spec.spec.flux_container.resources.cpu()
    if cpu is None:
        return None
    return max(1, math.floor(cpu))


def _container_args(spec: MiniCluster, paths: PodPaths) -> list[str]:
    body = spec.spec
    lead = body.flux_container
    if body.interactive and not lead.launcher:
        return []
    if lead.commands.script:
        return ["/bin/bash", f"{paths.config_dir}/commands/script.sh"]
    return [k8s_escape(word) for word in lead.command or []]


def build_bundle(
    spec: MiniCluster,
    layout: Layout,
    cert: CurveCert,
    *,
    paths: PodPaths = DEFAULT_PATHS,
    cores_per_node: int | None = None,
) -> Bundle:
    """``cores_per_node`` describes every node with that many cores in R
    instead of the container's CPU request (or counting them at start). Those
    cores are process slots (Kubeflow Trainer's numProcPerNode) that nothing
    has checked against the node, so Flux is told to accept a node with fewer
    or more (``CORES_AS_SLOTS``); drained, a node would leave the job waiting
    forever. Tasks are not bound to them either (``flux_run_args``)."""
    body = spec.spec
    flux = body.flux
    root = flux.container.mount_path
    hosts = layout.hostlist(body.max_nodes)
    cores = cores_per_node or _cores_per_node(spec)
    gpus = body.flux_container.resources.gpus()
    resources = ResourceSet.from_nodes(hosts, cores=cores, gpus=gpus) if cores else None
    device = flux.network_device or "*"
    broker = BrokerConfig(
        hosts=hosts,
        curve_cert=f"{root}/run/curve.cert",
        default_port=BROKER_PORT,
        default_bind=f"tcp://{device}:%p",
        default_connect=layout.connect_template(),
        topo=flux.topology or DEFAULT_TOPOLOGY,
        connect_timeout=flux.connect_timeout or None,
        resource_path=f"{paths.config_dir}/R" if resources else f"{root}/run/R",
        access={"allow-guest-user": True, "allow-root-owner": True},
        queue_policy=body.queue_policy,
        simple_scheduler=flux.scheduler.simple,
        check_feasibility=True,
        resource_verify=CORES_AS_SLOTS if cores_per_node else None,
        checkpoint_seconds=body.lead_state.checkpoint_seconds if body.lead_state else None,
    )
    lead = body.flux_container
    params = EntrypointParams(
        name=spec.name,
        host_prefix=layout.host_prefix,
        max_nodes=body.max_nodes,
        flux_root=root,
        view_enabled=not flux.container.disable,
        view_name=flux.container.name,
        scheduler_simple=flux.scheduler.simple,
        quiet=body.logging.quiet,
        strict=body.logging.strict,
        interactive=body.interactive and not lead.launcher,
        launcher=lead.launcher,
        detect_cores=resources is None,
        gpus_per_node=gpus,
        broker_args=_broker_args(spec),
        flux_run_args=flux_run_args(spec, counted_cores=resources is not None),
        metrics_port=body.metrics.port if body.serves_metrics else 0,
        node_env=node_local_names(spec),
        health_enabled=body.health is not None,
        lead_state_dir=LEAD_STATE_DIR if body.lead_state else "",
        lead_address=layout.peer(0) if body.lead_state else "",
        lead_state_claim=(body.lead_state.claim_of(spec.name) or "") if body.lead_state else "",
        paths=paths,
    )
    files = {
        "entrypoint.sh": entrypoint_script(params),
        "connect.sh": connect_script(spec.name, root),
        "ready.sh": ready_script(spec.name, root),
        "broker.toml": broker.to_toml(),
        "hostlist": hosts + "\n",
        **metrics_program(),  # always: fluxhop status runs it too
        "node-env.lua": node_env_rc(spec.name, root),
    }
    where = {
        "entrypoint.sh": "entrypoint.sh",
        "connect.sh": "connect.sh",
        "ready.sh": "ready.sh",
        "broker.toml": paths.relative("broker.toml", "broker/broker.toml"),
        "hostlist": "hostlist",
        **{name: name for name in METRICS_FILES},
        "node-env.lua": paths.relative("node-env.lua", "shell/node-env.lua"),
    }
    if flux.container.copied:
        files["init.sh"] = init_script(spec.name, root)
        where["init.sh"] = "init.sh"
    if resources is not None:
        files["R"] = resources.to_json() + "\n"
        where["R"] = "R"
    _add_health(spec, paths, gpus, files, where)
    for command in COMMAND_FILES:
        text = getattr(lead.commands, command)
        if text:
            if paths.flat:
                raise SpecError(f"commands.{command} needs the nested ConfigMap layout")
            files[f"commands.{command}.sh"] = text if text.endswith("\n") else text + "\n"
            where[f"commands.{command}.sh"] = f"commands/{command}.sh"
    return Bundle(
        hostlist=hosts,
        broker=broker,
        resources=resources,
        cert=cert,
        config_files=files,
        config_paths=where,
        container_args=_container_args(spec, paths),
    )
