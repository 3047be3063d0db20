"""A MiniCluster's ``flux`` and ``logging`` settings: the Flux view, the
broker options, the scheduler."""

from __future__ import annotations

import shlex
from typing import ClassVar, Literal

from pydantic import (
    Field,
    SecretStr,
    field_validator,
)

from fluxhop.errors import CurveCertError, DurationError, FluxhopError
from fluxhop.flux import fsd
from fluxhop.flux.broker import QUEUE_POLICIES
from fluxhop.flux.curve import CurveCert
from fluxhop.flux.limits import MAX_CORES_PER_NODE, MAX_GPUS_PER_NODE
from fluxhop.flux.topology import validate_topo
from fluxhop.spec.container import ResourceRequirements, SecurityContext
from fluxhop.spec.model import OPERATOR, Model
from fluxhop.spec.rules import DnsLabel, EnvName, ImageRef, Interface

__all__ = [
    "DEFAULT_VIEW_IMAGE",
    "VIEW_VOLUMES",
    "FluxContainer",
    "FluxSpec",
    "LoggingSpec",
    "Scheduler",
]

DEFAULT_VIEW_IMAGE = "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble"


# How the view reaches the pods (fluxhop extension flux.container.volume):
# "image" mounts the view image read-only (an image volume, KEP-4639: GA in
# Kubernetes 1.36, on by default from 1.35, on containerd >= 2.2 or CRI-O >=
# 1.33, which mount its subPaths): nothing is copied. "copy" copies it in an init container into an
# emptyDir, as the Flux Operator does. "auto": "image" where every node the
# pods may land on can mount one, "copy" elsewhere (fluxhop create decides).
VIEW_VOLUMES = ("auto", "image", "copy")


class FluxContainer(Model):
    """The Flux install the pods run (the "flux view"), from its image."""

    image: ImageRef = DEFAULT_VIEW_IMAGE
    disable: bool = False
    volume: Literal["auto", "image", "copy"] = "auto"
    name: DnsLabel = "flux-view"  # an init container's name
    mount_path: str = "/mnt/flux"
    pull_always: bool = False
    working_dir: str | None = None
    python_path: str | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    security_context: SecurityContext | None = None
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "imagePullSecret": "the Flux Operator never used it either; set containers[].imagePullSecret",
    }

    @property
    def mounted(self) -> bool:
        """Whether the pods mount the view image (or copy it). "auto" left
        to render is "image", Kubernetes' own default since 1.35: fluxhop
        create first resolves it against the cluster's nodes."""
        return not self.disable and self.volume != "copy"

    @property
    def copied(self) -> bool:
        return not self.disable and self.volume == "copy"

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
    # The CURVE certificate with its secret key: shown as ********** in repr,
    # str and JSON dumps; only render reads it (get_secret_value) into the Secret.
    curve_cert: SecretStr | None = None
    environment: dict[EnvName, str] = Field(default_factory=dict)
    network_device: Interface | None = None  # fluxhop extension: the interface brokers bind
    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "arch": "the Flux Operator does not use it either",
        "submitCommand": "fluxhop runs the job with flux run" + OPERATOR,
        "wrap": "fluxhop does not implement flux start --wrap" + OPERATOR,
        "minimalService": "fluxhop brokers always resolve each other through the headless Service"
        + OPERATOR,
        "disableSocket": "fluxhop always creates the broker socket" + OPERATOR,
        "noWaitSocket": "fluxhop does not run sidecar start scripts" + OPERATOR,
        "completeWorkers": "fluxhop workers always exit 0 when the instance shuts down normally"
        + OPERATOR,
        "mungeSecret": "the Flux Operator does not use it either",
        "bursting": "fluxhop does not implement bursting across clusters" + OPERATOR,
        "brokerConfig": "fluxhop generates and validates broker.toml itself" + OPERATOR,
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
                words = shlex.split(value)
            except ValueError as err:
                raise ValueError(f"cannot split into words: {err}") from None
            problem = _sizes_problem(words)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("curve_cert")
    @classmethod
    def _cert(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            try:
                CurveCert.from_zpl(value.get_secret_value())
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
        "timed": "time the job with your own wrapper" + OPERATOR
    }


# flux run's options that size a task: (short, long) -> the most a node has
_SIZED = {
    ("-c", "--cores-per-task"): MAX_CORES_PER_NODE,
    ("-g", "--gpus-per-task"): MAX_GPUS_PER_NODE,
}


def _option_values(words: list[str], short: str, long: str) -> list[str]:
    """The values given to one option, in each of its spellings."""
    values = []
    for i, word in enumerate(words):
        if word in (short, long) and i + 1 < len(words):
            values.append(words[i + 1])
        elif word.startswith(f"{long}="):
            values.append(word[len(long) + 1 :])
        elif word.startswith(short) and len(word) > len(short) and not word.startswith("--"):
            values.append(word[len(short) :])
    return values


def _sizes_problem(words: list[str]) -> str | None:
    """A task size or time limit in the flags beyond what any node or job has."""
    for (short, long), most in _SIZED.items():
        for value in _option_values(words, short, long):
            if value.isascii() and value.isdigit() and int(value) > most:
                return f"{short} {value} asks more than any node has (at most {most})"
            if short == "-c" and value.isascii() and value.isdigit() and int(value) < 1:
                return f"-c {value}: a task needs 1 or more cores"
    for value in _option_values(words, "-t", "--time-limit"):
        try:
            fsd.parse_time_limit(value)
        except FluxhopError as err:
            return f"-t {err}"
    return None
