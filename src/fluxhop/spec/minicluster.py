"""The MiniCluster model: the Flux Operator's ``flux-framework.org/v1alpha2``
``MiniCluster``, typed, validated, and read from the YAML users already have.

Field names and defaults follow the CRD. Three deliberate differences:

* ``containers[].command`` is held as an argv list. A YAML string is split
  with POSIX shell quoting rules (``sh -c 'a && b'`` stays three words), the
  way the operator's generated script splits it; shell operators outside
  quotes are not interpreted, so use ``sh -c`` for pipelines.
* Operator features fluxhop does not implement are accepted with a one-line
  warning (see each model's ``UNSUPPORTED``), never silently.
* Invalid values fail at load with one line, before anything is rendered.
"""

from __future__ import annotations

import copy
import shlex
import warnings
from decimal import Decimal
from typing import Any, ClassVar, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from fluxhop.errors import CurveCertError, DurationError, FluxhopError, FluxhopWarning, SpecError
from fluxhop.flux import fsd
from fluxhop.flux.broker import QUEUE_POLICIES
from fluxhop.flux.curve import CurveCert
from fluxhop.flux.topology import validate_topo
from fluxhop.spec.names import check_dns_label, dns_label_problem
from fluxhop.spec.quantity import parse_quantity
from fluxhop.spec.screen import screen, spec_error

__all__ = [
    "API_VERSION",
    "DEFAULT_APP_IMAGE",
    "DEFAULT_VIEW_IMAGE",
    "Container",
    "MiniCluster",
    "MiniClusterSpec",
]

API_VERSION = "flux-framework.org/v1alpha2"
DEFAULT_VIEW_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble"
DEFAULT_APP_IMAGE = "ghcr.io/rse-ops/accounting:app-latest"  # the CRD default
_LEGACY = "it is a v1alpha1 field that the v1alpha2 API server prunes"
_OPERATOR = " (--target minicluster passes it on to the Flux Operator)"


class Model(BaseModel):
    """Base: camelCase on the wire, no stray keys, mutable for builders."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, validate_assignment=True
    )
    UNSUPPORTED: ClassVar[dict[str, str]] = {}

    def wire(self) -> dict[str, Any]:
        """The camelCase dict of the fields that were set or differ from defaults."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)


class ResourceRequirements(Model):
    limits: dict[str, str | int | float] = Field(default_factory=dict)
    requests: dict[str, str | int | float] = Field(default_factory=dict)

    @field_validator("limits", "requests")
    @classmethod
    def _quantities(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, amount in value.items():
            try:
                if parse_quantity(amount) < 0:
                    raise ValueError(f"{name} must not be negative")
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None
        return value

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

    path: str | None = None
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
    name: str
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
        "prefix": "fluxhop does not implement it; wrap the command yourself" + _OPERATOR,
        "servicePre": "fluxhop does not run sidecar start scripts" + _OPERATOR,
    }


class LifeCycle(Model):
    post_start_exec: str | None = None
    pre_stop_exec: str | None = None


class Capabilities(Model):
    add: list[str] = Field(default_factory=list)
    drop: list[str] = Field(default_factory=list)


class SecurityContext(Model):
    """A container's Kubernetes SecurityContext (the fields the CRD knows)."""

    allow_privilege_escalation: bool | None = None
    capabilities: Capabilities | None = None
    privileged: bool | None = None
    proc_mount: str | None = None
    read_only_root_filesystem: bool | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    run_as_user: int | None = None
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


class PodSecurityContext(Model):
    """A pod's Kubernetes PodSecurityContext (the fields the CRD knows)."""

    fs_group: int | None = None
    fs_group_change_policy: str | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    run_as_user: int | None = None
    se_linux_options: dict[str, str] | None = Field(None, alias="seLinuxOptions")
    seccomp_profile: dict[str, str] | None = None
    supplemental_groups: list[int] | None = None
    sysctls: list[dict[str, str]] | None = None
    windows_options: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class Container(Model):
    image: str = DEFAULT_APP_IMAGE
    name: str | None = None
    command: list[str] | None = None
    working_dir: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    volumes: dict[str, ContainerVolume] = Field(default_factory=dict)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    image_pull_secret: str | None = None
    pull_always: bool = False
    security_context: SecurityContext | None = None
    ports: list[int] = Field(default_factory=list)
    secrets: dict[str, SecretRef] = Field(default_factory=dict)
    commands: Commands = Field(default_factory=Commands)
    life_cycle: LifeCycle = Field(default_factory=LifeCycle)
    run_flux: bool | None = None
    launcher: bool = False
    no_wrap_entrypoint: bool = False
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "batch": "fluxhop does not implement batch mode; use a launcher script" + _OPERATOR,
        "batchRaw": "fluxhop does not implement batch mode; use a launcher script" + _OPERATOR,
        "logs": "job output goes to the lead pod's log" + _OPERATOR,
    }

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

    def pull_policy(self) -> str | None:
        return "Always" if self.pull_always else self.image_pull_policy


class FluxContainer(Model):
    """The init container that provides a Flux install (the "flux view")."""

    image: str = DEFAULT_VIEW_IMAGE
    disable: bool = False
    name: str = "flux-view"
    mount_path: str = "/mnt/flux"
    pull_always: bool = False
    working_dir: str | None = None
    python_path: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    security_context: SecurityContext | None = None
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "imagePullSecret": "the Flux Operator never used it either; set containers[].imagePullSecret",
    }

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or value.rstrip("/") == "":
            raise ValueError("must be an absolute directory such as /mnt/flux")
        return value.rstrip("/")


class Scheduler(Model):
    queue_policy: str | None = None
    simple: bool = False

    @field_validator("queue_policy")
    @classmethod
    def _policy(cls, value: str | None) -> str | None:
        if value is not None and value not in QUEUE_POLICIES:
            raise ValueError(f"must be one of {', '.join(QUEUE_POLICIES)}")
        return value


class FluxSpec(Model):
    container: FluxContainer = Field(default_factory=FluxContainer)
    connect_timeout: str = "5s"
    log_level: int = Field(6, ge=0, le=7)
    option_flags: str | None = None
    topology: str | None = None
    scheduler: Scheduler = Field(default_factory=Scheduler)
    curve_cert: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    network_device: str | None = None  # fluxhop extension: the interface brokers bind
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "arch": "the Flux Operator does not use it either",
        "submitCommand": "fluxhop runs the job with flux run" + _OPERATOR,
        "wrap": "fluxhop does not implement flux start --wrap" + _OPERATOR,
        "minimalService": "fluxhop brokers always resolve each other through the headless Service"
        + _OPERATOR,
        "disableSocket": "fluxhop always creates the broker socket" + _OPERATOR,
        "noWaitSocket": "fluxhop does not run sidecar start scripts" + _OPERATOR,
        "completeWorkers": "fluxhop workers always exit 0 when the instance shuts down normally"
        + _OPERATOR,
        "mungeSecret": "the Flux Operator does not use it either",
        "bursting": "fluxhop does not implement bursting across clusters" + _OPERATOR,
        "brokerConfig": "fluxhop generates and validates broker.toml itself" + _OPERATOR,
    }

    @field_validator("connect_timeout")
    @classmethod
    def _fsd(cls, value: str) -> str:
        if value != "":
            try:
                fsd.parse(value)
            except DurationError as err:
                raise ValueError(str(err)) from None
        return value

    @field_validator("topology")
    @classmethod
    def _topo(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                validate_topo(value)
            except FluxhopError as err:
                raise ValueError(str(err)) from None
        return value

    @field_validator("option_flags")
    @classmethod
    def _flags(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                shlex.split(value)
            except ValueError as err:
                raise ValueError(f"cannot split into words: {err}") from None
        return value

    @field_validator("curve_cert")
    @classmethod
    def _cert(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                CurveCert.from_zpl(value)
            except CurveCertError as err:
                raise ValueError(str(err)) from None
        return value

    def option_words(self) -> list[str]:
        return shlex.split(self.option_flags) if self.option_flags else []


class LoggingSpec(Model):
    quiet: bool = False
    strict: bool = False
    debug: bool = False
    zeromq: bool = False
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "timed": "time the job with your own wrapper" + _OPERATOR
    }


class Network(Model):
    headless_name: str | None = None
    disable_affinity: bool = False

    @field_validator("headless_name")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        return check_dns_label(value, "headlessName") if value is not None else None


class Toleration(Model):
    key: str | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class PodSpec(Model):
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_affinity: dict[str, list[str]] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    service_account_name: str | None = None
    automount_service_account_token: bool | None = None
    security_context: PodSecurityContext | None = None
    scheduler_name: str | None = None
    runtime_class_name: str | None = None
    dns_policy: str | None = None
    host_ipc: bool = Field(False, alias="hostIPC")
    host_pid: bool = Field(False, alias="hostPID")
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "restartPolicy": "fluxhop restarts brokers inside the pod and fails the Job on a failed job"
        + _OPERATOR,
        "resources": "the Flux Operator turns it into pod overhead; set containers[].resources"
        + _OPERATOR,
    }


class MiniClusterSpec(Model):
    size: int = Field(1, ge=1)
    max_size: int | None = Field(None, ge=1)
    min_size: int | None = Field(None, ge=1)
    tasks: int = Field(1, ge=0)
    interactive: bool = False
    deadline_seconds: int = Field(31_500_000, ge=1)
    backoff_limit: int | None = Field(None, ge=0)
    job_labels: dict[str, str] = Field(default_factory=dict)
    cleanup: bool = False
    share_process_namespace: bool = False
    network: Network = Field(default_factory=Network)
    pod: PodSpec = Field(default_factory=PodSpec)
    flux: FluxSpec = Field(default_factory=FluxSpec)
    logging: LoggingSpec = Field(default_factory=LoggingSpec)
    containers: list[Container] = Field(min_length=1)
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "services": "fluxhop does not create a services pod; use sidecar containers" + _OPERATOR,
        "archive": "fluxhop does not restore KVS archives" + _OPERATOR,
        "volumes": _LEGACY,
        "users": _LEGACY,
        "fluxRestful": _LEGACY,
        "cores": _LEGACY,
        "fluxUser": _LEGACY,
        "preCommand": _LEGACY,
        "diagnostics": _LEGACY,
    }

    @model_validator(mode="after")
    def _consistent(self) -> MiniClusterSpec:
        if self.max_size is not None and self.max_size < self.size:
            raise ValueError(f"maxSize {self.max_size} is smaller than size {self.size}")
        if self.min_size is not None and self.min_size > self.size:
            raise ValueError(f"minSize {self.min_size} is larger than size {self.size}")
        flux_containers = [c for c in self.containers if c.run_flux]
        if len(self.containers) == 1 and self.containers[0].run_flux is None:
            flux_containers = list(self.containers)
        if len(flux_containers) != 1:
            raise ValueError(
                f"exactly one container must set runFlux: true (found {len(flux_containers)})"
            )
        for index, container in enumerate(self.containers):
            if container is not flux_containers[0] and not container.name:
                raise ValueError(f"containers[{index}] is a sidecar and needs a name")
        lead = flux_containers[0]
        if lead.command and lead.commands.script:
            raise ValueError("set either command or commands.script, not both")
        return self

    @property
    def flux_container(self) -> Container:
        explicit = [c for c in self.containers if c.run_flux]
        return explicit[0] if explicit else self.containers[0]

    @property
    def sidecars(self) -> list[Container]:
        lead = self.flux_container
        return [c for c in self.containers if c is not lead]

    @property
    def max_nodes(self) -> int:
        """Hosts written into the broker config and R: maxSize, else size."""
        return self.max_size or self.size


class Metadata(Model):
    name: str | None = None
    namespace: str = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        key: "it is set by the API server"
        for key in (
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "selfLink",
            "finalizers",
            "ownerReferences",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generateName",
        )
    }

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return check_dns_label(value, "namespace")


class MiniCluster(Model):
    """A MiniCluster document (``kind: MiniCluster``, v1alpha2)."""

    api_version: str = API_VERSION
    kind: Literal["MiniCluster"] = "MiniCluster"
    metadata: Metadata = Field(default_factory=Metadata)
    spec: MiniClusterSpec
    UNSUPPORTED: ClassVar[dict[str, str]] = {"status": "it is set by the operator"}
    # Operator features fluxhop's own pods do not implement (batch, services,
    # ...), kept with their paths for the Flux Operator target, which can run them.
    _operator_extras: list[tuple[tuple[Any, ...], Any]] = PrivateAttr(default_factory=list)

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(f"must be {API_VERSION} (the v1alpha2 MiniCluster), not {value!r}")
        return value

    @model_validator(mode="after")
    def _names(self) -> MiniCluster:
        name = self.metadata.name
        if name is not None:
            problem = dns_label_problem(name)
            if problem:
                raise ValueError(f"metadata.name {name!r} {problem}")
            longest = f"{name}-{self.spec.max_nodes - 1}"
            if len(longest) > 63:
                raise ValueError(
                    f"metadata.name {name!r} is too long: pod host name {longest!r} would exceed "
                    "63 characters; use a shorter name"
                )
        lead = self.spec.flux_container
        if self.spec.interactive and lead.command and not lead.launcher:
            warnings.warn(
                "spec.interactive is set, so the command of the Flux container is not run; "
                "run it inside the instance (flux proxy) or drop interactive",
                FluxhopWarning,
                stacklevel=2,
            )
        return self

    @property
    def name(self) -> str:
        if not self.metadata.name:
            raise SpecError("metadata.name is not set; give the MiniCluster a name")
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def headless_name(self) -> str:
        return self.spec.network.headless_name or self.name

    @classmethod
    def from_dict(cls, data: Any) -> MiniCluster:
        """Validate a MiniCluster mapping; one-line :class:`SpecError` on failure."""
        if not isinstance(data, dict):
            raise SpecError(
                "a MiniCluster document must be a mapping with apiVersion, kind, metadata, spec"
            )
        if data.get("kind", "MiniCluster") != "MiniCluster":
            raise SpecError(f"kind: expected MiniCluster, got {data.get('kind')!r}")
        dropped: list[tuple[tuple[Any, ...], Any, str]] = []
        cleaned = screen(data, cls, dropped=dropped)
        try:
            model = cls.model_validate(cleaned)
        except ValidationError as err:
            raise spec_error(err) from None
        extras = [
            (path, copy.deepcopy(value))
            for path, value, reason in dropped
            if reason.endswith(_OPERATOR)
        ]
        # The operator gets each command exactly as written (batch mode reads lines).
        spec_data: dict[str, Any] = data["spec"] if isinstance(data.get("spec"), dict) else {}
        for group in ("containers",):
            for index, container in enumerate(spec_data.get(group) or []):
                if isinstance(container, dict) and isinstance(container.get("command"), str):
                    extras.append((("spec", group, index, "command"), container["command"]))
        model._operator_extras = extras
        return model

    @property
    def operator_extras(self) -> list[tuple[tuple[Any, ...], Any]]:
        """Flux Operator fields fluxhop ignores, as (path, value) pairs."""
        return copy.deepcopy(self._operator_extras)

    def renamed(self, name: str | None = None, namespace: str | None = None) -> MiniCluster:
        """A copy with another name and/or namespace (the source is kept)."""
        clone = self.model_copy(deep=True)
        if name is not None:
            clone.metadata.name = check_dns_label(name, "name")
            MiniCluster.model_validate(clone.model_dump())  # re-check host name length
        if namespace is not None:
            clone.metadata.namespace = namespace
        clone._operator_extras = copy.deepcopy(self._operator_extras)
        return clone

    @classmethod
    def from_yaml(cls, text: str) -> MiniCluster:
        """Load a MiniCluster manifest (one YAML document)."""
        try:
            documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise SpecError(f"not valid YAML{where}: {getattr(err, 'problem', err)}") from None
        if len(documents) != 1:
            raise SpecError(f"expected one MiniCluster document, found {len(documents)}")
        return cls.from_dict(documents[0])

    def to_dict(self) -> dict[str, Any]:
        """The document in wire form (camelCase), without defaulted fields."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) | {
            "apiVersion": self.api_version,
            "kind": self.kind,
        }
