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

The parts live beside this module (``container``, ``pod``, ``fluxsettings``,
``model``); this one assembles them into the document and re-exports them.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from fluxhop.arguments import checked
from fluxhop.documents import load_all
from fluxhop.errors import FluxhopWarning, InputError, SpecError
from fluxhop.flux.limits import MAX_CORES_PER_NODE, MAX_SECONDS, MAX_TASKS
from fluxhop.nesting import check_data
from fluxhop.spec import legacy
from fluxhop.spec.autoscale import AutoscaleSpec
from fluxhop.spec.container import (
    DEFAULT_APP_IMAGE,
    Capabilities,
    Commands,
    Container,
    ContainerVolume,
    LifeCycle,
    ResourceRequirements,
    SecretRef,
    SecurityContext,
    host_ports_problem,
)
from fluxhop.spec.fluxsettings import (
    DEFAULT_VIEW_IMAGE,
    FluxContainer,
    FluxSpec,
    LoggingSpec,
    Scheduler,
)
from fluxhop.spec.health import HealthSpec
from fluxhop.spec.leadstate import LEAD_STATE_DIR, LeadState
from fluxhop.spec.metrics import MetricsSpec
from fluxhop.spec.model import LEGACY, OPERATOR, Model
from fluxhop.spec.names import check_dns_label, dns_label_problem
from fluxhop.spec.pod import Network, PodSecurityContext, PodSpec, Toleration
from fluxhop.spec.rules import MAX_NODES, Labels, ManagedBy, QualifiedName
from fluxhop.spec.screen import screen, spec_error
from fluxhop.spec.security import restricted_problem
from fluxhop.spec.views import view_problem

__all__ = [
    "API_VERSION",
    "DEFAULT_APP_IMAGE",
    "DEFAULT_QUEUE_POLICY",
    "DEFAULT_VIEW_IMAGE",
    "FLUXHOP_OPERATOR",
    "Capabilities",
    "Commands",
    "Container",
    "ContainerVolume",
    "FluxContainer",
    "FluxSpec",
    "LifeCycle",
    "LoggingSpec",
    "Metadata",
    "MiniCluster",
    "MiniClusterSpec",
    "Model",
    "Network",
    "PodSecurityContext",
    "PodSpec",
    "ResourceRequirements",
    "Scheduler",
    "SecretRef",
    "SecurityContext",
    "Toleration",
]

API_VERSION = "flux-framework.org/v1alpha2"
DEFAULT_QUEUE_POLICY = "easy"  # MiniClusterSpec.queue_policy says why


FLUXHOP_OPERATOR = "fluxhop.io/operator"  # spec.managedBy of what fluxhop operator keeps


class MiniClusterSpec(Model):
    size: int = Field(1, ge=1)
    max_size: int | None = Field(None, ge=1)
    min_size: int | None = Field(None, ge=1)
    tasks: int | None = Field(None, ge=0, le=MAX_TASKS)  # None: one per node, as flux run -N
    interactive: bool = False
    deadline_seconds: int = Field(31_500_000, ge=1, le=MAX_SECONDS)
    backoff_limit: int | None = Field(None, ge=0, le=2**31 - 1)  # an int32 in batch/v1
    job_labels: Labels = Field(default_factory=dict)
    cleanup: bool = False
    share_process_namespace: bool = False
    network: Network = Field(default_factory=Network)
    pod: PodSpec = Field(default_factory=PodSpec)
    flux: FluxSpec = Field(default_factory=FluxSpec)
    logging: LoggingSpec = Field(default_factory=LoggingSpec)
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)  # a fluxhop extension
    autoscale: AutoscaleSpec | None = None  # a fluxhop extension
    health: HealthSpec | None = None  # a fluxhop extension
    lead_state: LeadState | None = None  # a fluxhop extension
    # a fluxhop extension: the controller that keeps the MiniCluster resource
    # (unset or fluxhop.io/operator: fluxhop operator; another, e.g. Kueue's
    # MultiKueue, and fluxhop operator leaves it alone). Immutable (the CRD).
    managed_by: ManagedBy | None = None
    # a fluxhop extension, Kueue's convention for a job: held, no pods, until
    # false. fluxhop operator sets it for a queued resource until Kueue admits it.
    suspend: bool = False
    containers: list[Container] = Field(min_length=1)
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "services": "fluxhop does not create a services pod; use sidecar containers" + OPERATOR,
        "archive": "fluxhop does not restore KVS archives" + OPERATOR,
        **{key: f"{LEGACY}; {became}" for key, became in legacy.SPEC.items()},
    }

    @property
    def managed_elsewhere(self) -> bool:
        """Another controller keeps the resource (spec.managedBy)."""
        return self.managed_by not in (None, FLUXHOP_OPERATOR)

    @field_validator("size", "max_size", "min_size")
    @classmethod
    def _pods(cls, value: int | None) -> int | None:
        if value is not None and value > MAX_NODES:
            raise ValueError(
                f"is {value}; at most {MAX_NODES}, the most pods an Indexed Job may have"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MiniClusterSpec:
        if self.max_size is not None and self.max_size < self.size:
            raise ValueError(f"maxSize {self.max_size} is smaller than size {self.size}")
        if (
            self.min_size is not None
            and self.max_size is not None
            and self.min_size > self.max_size
        ):
            raise ValueError(f"minSize {self.min_size} is larger than maxSize {self.max_size}")
        if self.min_size is not None and self.min_size > self.size:
            raise ValueError(f"minSize {self.min_size} is larger than size {self.size}")
        if self.serves_metrics and any(self.metrics.port in c.ports for c in self.containers):
            raise ValueError(
                f"metrics.port {self.metrics.port} is also a container's port; choose another "
                "for the metrics (or set metrics.enabled: false)"
            )
        if self.autoscale is not None and self.max_size is None:
            raise ValueError("autoscale needs maxSize, the most nodes the MiniCluster may grow to")
        if self.health and self.health.on_failure == "replace" and self.max_nodes < 2:
            raise ValueError(
                "health.onFailure replace needs size 2 or more (rank 0 is never replaced)"
            )
        for container in self.containers:
            for name, volume in container.volumes.items():
                if (volume.path or "").rstrip("/") == LEAD_STATE_DIR:
                    raise ValueError(
                        f"volume {name}: {LEAD_STATE_DIR} is where fluxhop keeps rank 0's state "
                        "(spec.leadState); mount it elsewhere"
                    )
        if self.lead_state is not None and not self.interactive:
            raise ValueError(
                "leadState keeps an interactive MiniCluster's queue across the loss of rank 0; "
                "set interactive: true (a batch MiniCluster's new rank 0 would run its command again)"
            )
        if self.tasks is not None and -(-self.tasks // self.size) > MAX_CORES_PER_NODE:
            raise ValueError(
                f"tasks {self.tasks} on size {self.size} is {-(-self.tasks // self.size)} tasks "
                f"per node, more than any node has cores for (at most {MAX_CORES_PER_NODE})"
            )
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
        mismatch = None if self.flux.container.disable else view_problem(
            self.flux.container.image, lead.image
        )  # fmt: skip
        if mismatch:
            warnings.warn(mismatch, FluxhopWarning, stacklevel=2)
        problem = host_ports_problem(self.containers, self.pod.pods_per_node)
        if problem:
            raise ValueError(problem)
        if self.pod.security_profile == "restricted":
            problem = restricted_problem(self)
            if problem:
                raise ValueError(problem)
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
    def ntasks(self) -> int:
        """The job's task count: ``tasks``, else one per node (``flux run -N``'s
        rule; the Flux Operator's default of one task in all is a known trap)."""
        return self.size if self.tasks is None else self.tasks

    @property
    def serves_metrics(self) -> bool:
        return self.metrics.serves(interactive=self.interactive)

    @property
    def max_nodes(self) -> int:
        """Hosts written into the broker config and R: maxSize, else size."""
        return self.max_size or self.size

    @property
    def elastic(self) -> bool:
        """Whether jobs may be submitted while some of the instance's ranks are
        not up: it can grow (maxSize above size) or starts before all have
        joined (minSize below size)."""
        partial_start = self.min_size is not None and self.min_size < self.size
        return self.max_nodes > self.size or partial_start

    @property
    def queue_policy(self) -> str | None:
        """Fluxion's queue policy: the one asked for, else ``easy``; None under
        sched-simple. Not Fluxion's own default, fcfs: a MiniCluster's ranks
        are pods that restart and rejoin, and those beyond ``size`` come only
        with a scale-up, and under fcfs Fluxion fails a job larger than the
        nodes up at that moment (unsatisfiable: it counts only the nodes up),
        where easy, as sched-simple does, keeps it waiting for them."""
        scheduler = self.flux.scheduler
        if scheduler.simple:
            return None
        return scheduler.queue_policy or DEFAULT_QUEUE_POLICY

    @model_validator(mode="after")
    def _jobs_can_wait(self) -> MiniClusterSpec:
        """An elastic MiniCluster under Fluxion's fcfs fails the jobs that should
        wait for its ranks: refused with autoscale (whose growth such jobs
        would ask for), said once otherwise."""
        if self.queue_policy != "fcfs" or not self.elastic:
            return self
        fix = "use easy (fluxhop's default), hybrid or conservative, or flux.scheduler.simple"
        if self.autoscale is not None:
            raise ValueError(
                "flux.scheduler.queuePolicy fcfs cannot autoscale: Fluxion fails a job larger "
                f"than the nodes up instead of letting it wait for the growth; {fix}"
            )
        warnings.warn(
            "flux.scheduler.queuePolicy fcfs: Fluxion fails a job larger than the nodes up "
            f"(unsatisfiable) instead of letting it wait for the MiniCluster's other ranks; {fix}",
            FluxhopWarning,
            stacklevel=2,
        )
        return self


class Metadata(Model):
    name: str | None = None
    namespace: str = "default"
    labels: Labels = Field(default_factory=dict)
    annotations: dict[QualifiedName, str] = Field(default_factory=dict)
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
    # A default, not default_factory=list: pydantic copies an empty default per
    # instance, but reads a builtin factory's signature from its text each time
    # (tokenize's big pattern compiled on the first model: 2 ms of start-up).
    _operator_extras: list[tuple[tuple[Any, ...], Any]] = PrivateAttr(default=[])

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
        # bounded before anything recursive (screening, pydantic, deepcopy) meets it
        check_data(data, "the MiniCluster", error=SpecError)
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
            if reason.endswith(OPERATOR)
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

    @checked
    def renamed(self, name: str | None = None, namespace: str | None = None) -> MiniCluster:
        """A copy with another name and/or namespace (the source is kept); a
        name or namespace Kubernetes would refuse is a one-line :class:`SpecError`."""
        try:
            if name is not None:
                check_dns_label(name, "name")
            if namespace is not None:
                check_dns_label(namespace, "namespace")
        except ValueError as err:
            raise SpecError(str(err)) from None
        clone = self.model_copy(deep=True)
        if namespace is not None:
            clone.metadata.namespace = namespace
        if name is not None:
            clone.metadata.name = name
            try:
                MiniCluster.model_validate(clone.model_dump())  # re-check host name length
            except ValidationError as err:
                raise spec_error(err) from None
        clone._operator_extras = copy.deepcopy(self._operator_extras)
        return clone

    @classmethod
    @checked
    def from_yaml(
        cls,
        text: str,
        adjust: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        *,
        source: str | None = None,
    ) -> MiniCluster:
        """Load a MiniCluster manifest (one YAML document); ``adjust`` may change
        the document (e.g. CLI flags write their fields in) before it is checked;
        ``source`` (e.g. ``-f FILE``) is named when the text holds none or many."""
        try:
            documents = load_all(text, "the MiniCluster")
        except InputError as err:
            raise SpecError(str(err)) from None
        if len(documents) != 1:
            where = f"{source}: " if source else ""
            raise SpecError(f"{where}expected one MiniCluster document, found {len(documents)}")
        document = documents[0]
        if adjust is not None and isinstance(document, dict):
            document = adjust(document)
        return cls.from_dict(document)

    def to_dict(self) -> dict[str, Any]:
        """The document in wire form (camelCase) for display, without defaulted
        fields; a ``flux.curveCert`` shows as ``**********``."""
        dumped = self.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude_defaults=True
        )
        return dumped | {
            "apiVersion": self.api_version,
            "kind": self.kind,
        }
