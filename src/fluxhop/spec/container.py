"""A MiniCluster container: image, command, resources, volumes, security."""

from __future__ import annotations

import shlex
import warnings
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from fluxhop.errors import FluxhopWarning
from fluxhop.spec import legacy
from fluxhop.spec.model import OPERATOR, Model
from fluxhop.spec.names import check_dns_label
from fluxhop.spec.quantity import parse_quantity, size_problem
from fluxhop.spec.rules import (
    AbsolutePath,
    DnsLabel,
    DnsSubdomain,
    EnvName,
    Id,
    ImageRef,
    Port,
    ResourceName,
)

__all__ = [
    "DEFAULT_APP_IMAGE",
    "Capabilities",
    "Commands",
    "Container",
    "ContainerVolume",
    "LifeCycle",
    "ResourceRequirements",
    "SecretRef",
    "SecurityContext",
    "host_ports_problem",
]

DEFAULT_APP_IMAGE = "ghcr.io/rse-ops/accounting:app-latest"  # the CRD default


def _is_extended(name: str) -> bool:
    """An extended resource (``nvidia.com/gpu``, ``amd.com/gpu``, ...): a
    qualified name outside the kubernetes.io domains, or any GPU."""
    domain = name.partition("/")[0] if "/" in name else ""
    native = domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return (bool(domain) and not native) or "gpu" in name.lower()


class ResourceRequirements(Model):
    limits: dict[ResourceName, str | int | float] = Field(default_factory=dict)
    requests: dict[ResourceName, str | int | float] = Field(default_factory=dict)

    @field_validator("limits", "requests")
    @classmethod
    def _quantities(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, amount in value.items():
            try:
                number = parse_quantity(amount)
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None
            if number < 0:
                raise ValueError(f"{name} must not be negative")
            problem = size_problem(name, number)
            if problem:
                raise ValueError(f"{name} is {amount}: {problem}")
        return value

    @model_validator(mode="after")
    def _extended_resources(self) -> ResourceRequirements:
        """GPUs and other extended resources as Kubernetes takes them: whole
        numbers, in limits (it refuses one that is only in requests), equal in
        both where both are set."""
        for section in ("limits", "requests"):
            for name, amount in getattr(self, section).items():
                if _is_extended(name) and parse_quantity(amount) % 1:
                    raise ValueError(
                        f"{section}.{name} is {amount!r}: {name} comes in whole units "
                        "(Kubernetes does not share a device); use a whole number"
                    )
        for name, amount in self.requests.items():
            if not _is_extended(name):
                continue
            if name not in self.limits:
                warnings.warn(
                    f"resources.requests.{name} is set but resources.limits.{name} is not; "
                    "Kubernetes only honours extended resources in limits, so fluxhop puts "
                    f"{amount} there too",
                    FluxhopWarning,
                    stacklevel=2,
                )
                self.limits = {**self.limits, name: amount}
            elif parse_quantity(self.limits[name]) != parse_quantity(amount):
                raise ValueError(
                    f"requests.{name} ({amount}) and limits.{name} ({self.limits[name]}) "
                    "differ; Kubernetes needs them equal for extended resources"
                )
        return self

    def cpu(self) -> Decimal | None:
        """CPUs the pod is guaranteed: the request, else the limit."""
        for source in (self.requests, self.limits):
            if "cpu" in source:
                return parse_quantity(source["cpu"])
        return None

    def gpus(self) -> int:
        """GPUs per pod: the first extended resource with "gpu" in its name
        (nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915, ...)."""
        for source in (self.limits, self.requests):
            for name, amount in source.items():
                if "gpu" in name.lower():
                    return int(parse_quantity(amount))
        return 0


class ContainerVolume(Model):
    """An existing volume to mount (the operator's ``ContainerVolume``)."""

    path: AbsolutePath | None = None
    read_only: bool = False
    claim_name: str | None = None
    config_map_name: str | None = None
    secret_name: str | None = None
    host_path: str | None = None
    empty_dir: bool = False
    empty_dir_medium: str | None = None
    empty_dir_size_limit: str | None = None
    csi_driver: str | None = None
    csi_driver_attributes: dict[str, str] = Field(default_factory=dict)
    items: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs_path(self) -> ContainerVolume:
        if not self.path and not self.empty_dir:
            raise ValueError("set path, the directory to mount the volume at")
        sources = (
            self.claim_name,
            self.config_map_name,
            self.secret_name,
            self.host_path,
            self.csi_driver,
        )
        if not self.empty_dir and not any(sources):
            warnings.warn(
                f"volume at {self.path} names no source (claimName, hostPath, configMapName, "
                "secretName, csiDriver or emptyDir); fluxhop mounts an empty directory there",
                FluxhopWarning,
                stacklevel=2,
            )
        return self


class SecretRef(Model):
    name: DnsSubdomain
    key: str


class Commands(Model):
    """Shell snippets run by the entrypoint (bash, in the script's own shell)."""

    init: str | None = None
    pre: str | None = None
    broker_pre: str | None = None
    worker_pre: str | None = None
    post: str | None = None
    script: str | None = None
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "prefix": "fluxhop does not implement it; wrap the command yourself" + OPERATOR,
        "servicePre": "fluxhop does not run sidecar start scripts" + OPERATOR,
    }
    V1ALPHA1: ClassVar[dict[str, str]] = legacy.COMMANDS


class LifeCycle(Model):
    post_start_exec: str | None = None
    pre_stop_exec: str | None = None


class Capabilities(Model):
    add: list[str] = Field(default=[])
    drop: list[str] = Field(default=[])


class SecurityContext(Model):
    """A container's Kubernetes SecurityContext (the fields the CRD knows)."""

    allow_privilege_escalation: bool | None = None
    capabilities: Capabilities | None = None
    privileged: bool | None = None
    proc_mount: str | None = None
    read_only_root_filesystem: bool | None = None
    run_as_group: Id | None = None
    run_as_non_root: bool | None = None
    run_as_user: Id | None = None
    se_linux_options: dict[str, str] | None = Field(None, alias="seLinuxOptions")
    seccomp_profile: dict[str, str] | None = None
    windows_options: dict[str, Any] | None = None
    TRANSLATED: ClassVar[frozenset[str]] = frozenset({"addCapabilities"})

    @model_validator(mode="before")
    @classmethod
    def _legacy_add_capabilities(cls, data: Any) -> Any:
        if isinstance(data, dict) and "addCapabilities" in data:
            data = dict(data)
            added = data.pop("addCapabilities") or []
            warnings.warn(
                "securityContext.addCapabilities is the Flux Operator's old field; "
                "fluxhop reads it as securityContext.capabilities.add",
                FluxhopWarning,
                stacklevel=2,
            )
            capabilities = dict(data.get("capabilities") or {})
            capabilities["add"] = [*capabilities.get("add", []), *added]
            data["capabilities"] = capabilities
        return data

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


# Linux's limits on what execve takes: one argument (MAX_ARG_STRLEN, 32
# pages, with its NUL) and all of them with the environment (ARG_MAX, a
# quarter of the default 8 MiB stack)
MAX_WORD_BYTES = 32 * 4096
MAX_COMMAND_BYTES = 2 * 1024 * 1024


class Container(Model):
    image: ImageRef = DEFAULT_APP_IMAGE
    name: DnsLabel | None = None
    command: list[str] | None = None
    working_dir: AbsolutePath | None = None
    environment: dict[EnvName, str] = Field(default_factory=dict)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    volumes: dict[DnsLabel, ContainerVolume] = Field(default_factory=dict)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    image_pull_secret: DnsSubdomain | None = None
    pull_always: bool = False
    security_context: SecurityContext | None = None
    ports: list[Port] = Field(default=[])
    # a fluxhop extension: ports published on the pod's node too (hostPort =
    # containerPort), as NNF publishes the ports its port manager gives a
    # Workflow's containers; the scheduler then puts no two such pods on a node
    host_ports: list[Port] = Field(default=[])
    secrets: dict[EnvName, SecretRef] = Field(default_factory=dict)
    commands: Commands = Field(default_factory=Commands)
    life_cycle: LifeCycle = Field(default_factory=LifeCycle)
    run_flux: bool | None = None
    launcher: bool = False
    no_wrap_entrypoint: bool = False
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "batch": "fluxhop does not implement batch mode; use a launcher script" + OPERATOR,
        "batchRaw": "fluxhop does not implement batch mode; use a launcher script" + OPERATOR,
        "logs": "job output goes to the lead pod's log" + OPERATOR,
    }
    V1ALPHA1: ClassVar[dict[str, str]] = legacy.CONTAINER

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                words = shlex.split(value)
            except ValueError as err:
                raise ValueError(f"cannot split the command into words: {err}") from None
            return words or None
        return value

    @field_validator("command")
    @classmethod
    def _program_first(cls, value: list[str] | None) -> list[str] | None:
        if value and value[0].startswith("-"):
            raise ValueError(f"must start with a program name, not the option {value[0]!r}")
        return value

    @field_validator("command")
    @classmethod
    def _runnable(cls, value: list[str] | None) -> list[str] | None:
        """Words Linux can exec: one of more than MAX_ARG_STRLEN bytes, or
        all of them past ARG_MAX, fails execve with E2BIG in the pod."""
        sizes = [len(word.encode()) + 1 for word in value or []]  # each with its NUL
        for n, size in enumerate(sizes):
            if size > MAX_WORD_BYTES:
                raise ValueError(
                    f"word {n} is {size - 1} bytes; Linux runs no command with a word of more "
                    f"than {MAX_WORD_BYTES - 1} (MAX_ARG_STRLEN): pass the data in a file or volume"
                )
        if sum(sizes) > MAX_COMMAND_BYTES:
            raise ValueError(
                f"its words are {sum(sizes)} bytes together; Linux runs no command of more than "
                f"{MAX_COMMAND_BYTES} with its environment (ARG_MAX): pass the data in a file or volume"
            )
        return value

    @field_validator("environment", mode="before")
    @classmethod
    def _env_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(item, str):
                    raise ValueError(
                        f"{key}: environment values must be strings; quote {item!r} in the YAML"
                    )
        return value

    @field_validator("volumes")
    @classmethod
    def _volume_names(cls, value: dict[str, ContainerVolume]) -> dict[str, ContainerVolume]:
        for name in value:
            check_dns_label(name, "volume name")
        return value

    @field_validator("ports")
    @classmethod
    def _port_range(cls, value: list[int]) -> list[int]:
        for port in value:
            if not 1 <= port <= 65535:
                raise ValueError(f"port {port} is not in 1-65535")
        return value

    @field_validator("host_ports")
    @classmethod
    def _host_ports_once(cls, value: list[int]) -> list[int]:
        repeated = sorted({port for port in value if value.count(port) > 1})
        if repeated:
            raise ValueError(f"lists port {repeated[0]} twice; list each host port once")
        return value

    def pull_policy(self) -> str | None:
        return "Always" if self.pull_always else self.image_pull_policy


def host_ports_problem(containers: list[Container], pods_per_node: int | None) -> str | None:
    """Why the pods cannot publish the containers' hostPorts, or None: a node
    publishes each port once, for one container of one pod."""
    owner: dict[int, int] = {}
    for index, container in enumerate(containers):
        for port in container.host_ports:
            if port in owner:
                return (
                    f"containers[{index}].hostPorts: {port} is published by "
                    f"containers[{owner[port]}] already; publish it once"
                )
            owner[port] = index
    if owner and (pods_per_node or 1) > 1:
        return (
            f"pod.podsPerNode {pods_per_node} puts pods side by side, but only one pod on a "
            "node can publish hostPorts; set podsPerNode: 1 or drop hostPorts"
        )
    return None
