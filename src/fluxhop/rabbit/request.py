"""``rabbit.mpi.*`` jobspec attributes, read strictly.

Users ask for an MPI MiniCluster on their job's "rabbit" storage nodes with
``flux alloc -S rabbit.mpi.image=IMG -S rabbit.mpi.nodes=2 ...``; ``--setattr``
puts the values under ``attributes.system.rabbit.mpi`` with JSON decoding
(``true`` -> bool, ``4`` -> int, ``a,b`` -> the string ``"a,b"``).

Unlike the flux-coral2 prototype (reference/flux-coral2-rabbit-mpi.md §7.3),
every attribute is parsed for its own type: ``add_flux=false`` and ``no``
both disable the Flux view, ``succeed=no`` is off, ``rabbits=a,b`` is a list,
an unknown key is an error that names the closest key, and nothing is shared
between requests (each is a frozen value).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fluxhop.arguments import check_fields, checked
from fluxhop.errors import InputError
from fluxhop.flux.jobspec import Jobspec
from fluxhop.nesting import check_data
from fluxhop.rabbit.errors import RabbitError
from fluxhop.render.targets import Target
from fluxhop.spec.rules import dns_subdomain_problem

if TYPE_CHECKING:
    from fluxhop.rabbit.storage import RabbitVolume
    from fluxhop.rabbit.workflow import Workflow
    from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "ATTRIBUTES",
    "CXI_RESOURCE",
    "DEFAULT_IMAGE",
    "RabbitError",
    "RabbitRequest",
    "parse_bool",
]

DEFAULT_IMAGE = "ghcr.io/converged-computing/flux-slingshot:ubuntu2404"
CXI_RESOURCE = "beta.hpe.com/cxi"  # the CXI device plugin's resource name
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
# Every rabbit.mpi.* key: (what it takes, its default, what it does). The one
# source of the keys the parser accepts and of the generated reference page.
ATTRIBUTES: dict[str, tuple[str, str, str]] = {
    "image": ("string", f"`{DEFAULT_IMAGE}`", "the image the MPI workers run"),
    "workdir": ("string", "the image's", "working directory of the command"),
    "command": (
        "string (split like a shell) or JSON list",
        "none: interactive",
        "the job rank 0 runs; without one the MiniCluster waits for jobs",
    ),
    "add_flux": (
        "bool",
        "true unless the image is the default (which has Flux)",
        "add the Flux view init container",
    ),
    "succeed": ("bool", "false", "label the job always-succeed"),
    "exclusive": ("bool", "false", "accepted; every job takes whole nodes anyway"),
    "tasks": ("whole number", "one task per node", "tasks of the job"),
    "nodes": ("whole number", "all rabbits", "how many of the rabbits to use"),
    "rabbits": ("`a,b` or JSON list", "all of the job's rabbits", "which rabbits to use"),
    "env": ("`env.NAME=value`", "none", "environment variables of the workers"),
    "pull_policy": ("Always, IfNotPresent, Never", "the cluster's", "the image's pull policy"),
    "pull_secret": ("string", "none", "Secret to pull the image with"),
    "rabbit_mount": (
        "absolute path",
        "where NNF mounted each (its mountPath)",
        "where the rabbit file systems appear in the containers: one at the path, "
        "several in a directory each",
    ),
}
KEYS = tuple(ATTRIBUTES)
_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def _shown(value: Any) -> str:
    """A value as ``-S`` writes it (JSON), shortened, for a one-line error;
    never an error itself, whatever the value is."""
    try:
        check_data(value, "value")
    except InputError:
        return f"<{type(value).__name__} nested too deep>"
    text = json.dumps(value, default=lambda v: f"<{type(v).__name__}>", skipkeys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_bool(value: Any, key: str) -> bool:
    """JSON booleans, 0/1, and the strings true/false/yes/no/1/0 (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise RabbitError(f"rabbit.mpi.{key}={_shown(value)}: use true or false (or yes/no, 1/0)")


def _int(value: Any, key: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise RabbitError(f"rabbit.mpi.{key}={_shown(value)}: must be a whole number")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise RabbitError(f"rabbit.mpi.{key}={_shown(value)}: must be a whole number, e.g. {key}=4")
    if value < minimum:
        raise RabbitError(f"rabbit.mpi.{key}={value}: must be {minimum} or more")
    return value


def _str(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RabbitError(f"rabbit.mpi.{key}={_shown(value)}: must be a non-empty string")
    return value.strip()


def _command(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        if not value or not all(isinstance(word, str) for word in value):
            raise RabbitError("rabbit.mpi.command: a list must hold the command's words as strings")
        return tuple(value)
    text = _str(value, "command")
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise RabbitError(f"rabbit.mpi.command={text!r}: {err}") from None
    if not words:
        raise RabbitError("rabbit.mpi.command is empty")
    return tuple(words)


def _rabbits(value: Any) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RabbitError(
            f"rabbit.mpi.rabbits={_shown(value)}: use a list or a comma-separated string"
        )
    cleaned = tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
    if not cleaned:
        raise RabbitError(
            "rabbit.mpi.rabbits names no rabbit; list node names, e.g. rabbits=rabbit-p1,rabbit-p2"
        )
    for name in cleaned:
        problem = dns_subdomain_problem(name)
        if problem:
            raise RabbitError(f"rabbit.mpi.rabbits: {name!r} is not a node name: it {problem}")
    return cleaned


def _env(value: Any) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise RabbitError(
            f"rabbit.mpi.env={_shown(value)}: set variables as -S rabbit.mpi.env.NAME=VALUE"
        )
    env: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, (Mapping, list, tuple)) or item is None:
            raise RabbitError(f"rabbit.mpi.env.{key}: must be a plain value, not {_shown(item)}")
        env[str(key)] = json.dumps(item) if isinstance(item, bool) else str(item)
    return MappingProxyType(env)


def _attributes(source: Jobspec | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(source, Jobspec):
        return source.attributes
    if isinstance(source, Mapping):
        if "attributes" in source:
            attributes = source["attributes"] or {}
            if not isinstance(attributes, Mapping):
                raise RabbitError(
                    f"the jobspec's attributes must be a mapping, not {type(attributes).__name__}"
                )
            return attributes
        raise RabbitError(
            "expected a jobspec (with attributes), e.g. {'attributes': {'system': {...}}}"
        )
    raise RabbitError(f"expected a jobspec, not {type(source).__name__}")


@dataclass(frozen=True)
class RabbitRequest:
    """What a job asked for with ``rabbit.mpi.*`` (immutable, one per job)."""

    enabled: bool = False
    image: str = DEFAULT_IMAGE
    workdir: str | None = None
    command: tuple[str, ...] = ()
    add_flux: bool | None = None
    succeed: bool = False
    exclusive: bool = False
    tasks: int | None = None
    nodes: int | None = None
    rabbits: tuple[str, ...] | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    pull_policy: str | None = None
    pull_secret: str | None = None
    rabbit_mount: str | None = None  # None: where NNF mounted each, as NNF's containers see it

    @property
    def interactive(self) -> bool:
        return not self.command

    @property
    def adds_flux(self) -> bool:
        """Whether the Flux view is added: an explicit add_flux wins; by default
        only images other than the default (which has Flux) get it."""
        if self.add_flux is not None:
            return self.add_flux
        return self.image != DEFAULT_IMAGE

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    @checked
    def from_jobspec(cls, jobspec: Jobspec | Mapping[str, Any]) -> RabbitRequest:
        """Read ``attributes.system.rabbit.mpi`` of a jobspec (or jobspec mapping)."""
        system = _attributes(jobspec).get("system") or {}
        rabbit = system.get("rabbit") if isinstance(system, Mapping) else None
        if not isinstance(rabbit, Mapping) or "mpi" not in rabbit or rabbit["mpi"] is None:
            return cls()
        mpi = rabbit["mpi"]
        # what -S can store (JSON), bounded, before any value is read or shown
        check_data(mpi, "rabbit.mpi", error=RabbitError, json=True)
        if isinstance(mpi, Mapping):
            return cls._from_table(mpi)
        if isinstance(mpi, str) and not mpi.strip():
            return cls()
        if isinstance(mpi, (bool, int, str)):
            with contextlib.suppress(RabbitError):
                return cls(enabled=parse_bool(mpi, "enabled"))
        raise RabbitError(
            f"rabbit.mpi={_shown(mpi)}: use true/false (yes/no, 1/0), "
            "or set sub-keys such as rabbit.mpi.image=IMAGE"
        )

    @checked
    def to_minicluster(
        self,
        rabbits: Iterable[str] | str,
        *,
        name: str,
        namespace: str = "default",
        uid: int,
        gid: int,
        workflow: Workflow | Mapping[str, Any] | None = None,
        storage: Sequence[RabbitVolume] = (),
        cxi_resource: str | None = CXI_RESOURCE,
        target: Target | str = Target.JOB,
        cluster_domain: str = "cluster.local",
    ) -> MiniCluster:
        """The MiniCluster for this request on (a subset of) ``rabbits``,
        mounting ``storage`` (the Workflow's file systems, where NNF says
        they are: fluxhop.rabbit.storage), for the pods ``target`` makes."""
        from fluxhop.rabbit.builder import rabbit_minicluster

        return rabbit_minicluster(
            self,
            rabbits,
            name=name,
            namespace=namespace,
            uid=uid,
            gid=gid,
            workflow=workflow,
            storage=storage,
            cxi_resource=cxi_resource,
            target=target,
            cluster_domain=cluster_domain,
        )

    @classmethod
    def _from_table(cls, mpi: Mapping[str, Any]) -> RabbitRequest:
        values: dict[str, Any] = {"enabled": True}
        for key, value in mpi.items():
            if key not in KEYS:
                close = difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.5)
                hint = (
                    f"; did you mean rabbit.mpi.{close[0]}?"
                    if close
                    else f"; known keys: {', '.join(KEYS)}"
                )
                raise RabbitError(f"rabbit.mpi.{key} is not a rabbit MPI attribute{hint}")
            values[key] = _parse(key, value)
        return cls(**values)


def _parse(key: str, value: Any) -> Any:
    if key in ("add_flux", "succeed", "exclusive"):
        return parse_bool(value, key)
    if key == "tasks":
        return _int(value, key, 1)
    if key == "nodes":
        return _int(value, key, 1)
    if key == "command":
        return _command(value)
    if key == "rabbits":
        return _rabbits(value)
    if key == "env":
        return _env(value)
    if key == "pull_policy":
        policy = _str(value, key)
        matched = {p.lower(): p for p in PULL_POLICIES}.get(policy.lower())
        if matched is None:
            raise RabbitError(
                f"rabbit.mpi.pull_policy={policy!r}: must be one of {', '.join(PULL_POLICIES)}"
            )
        return matched
    if key == "rabbit_mount":
        path = _str(value, key)
        if not path.startswith("/"):
            raise RabbitError(f"rabbit.mpi.rabbit_mount={path!r}: must be an absolute path")
        return path.rstrip("/") or "/"
    return _str(value, key)
