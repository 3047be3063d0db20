"""``spec.health`` (a fluxhop extension): checks that keep a long-lived
MiniCluster's nodes good.

Each check is a bash command, stopped after ``timeoutSeconds``. A *passive*
check runs on every broker's node every ``intervalSeconds``; an *active* one
runs every ``intervalSeconds`` as a Flux job on the nodes no job holds, at the
lowest urgency and with whole nodes, so that it never runs beside user work
(an all-reduce over the idle nodes, say). A rank whose check fails is drained with the reason ``health: <check>: <first line>`` and
undrained once every check passes again, only if health drained it: an
admin's drain is never touched. With ``onFailure: replace`` fluxhop's
operator replaces the pod of a rank health drained once no job runs there
(never rank 0's, never more than ``maxReplacements`` at once) (render/templates/health.sh runs them; the
shipped checks, ``fluxhop_gpus``, ``fluxhop_disk_free`` and
``fluxhop_writable``, are in render/templates/health-checks.sh).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from fluxhop.errors import InputError
from fluxhop.flux.limits import MAX_SECONDS
from fluxhop.spec.model import Model
from fluxhop.spec.names import dns_label_problem
from fluxhop.spec.rules import DnsLabel

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_TIMEOUT", "REASON_PREFIX", "HealthCheck", "HealthSpec"]

DEFAULT_INTERVAL = 60
DEFAULT_TIMEOUT = 10
REASON_PREFIX = "health: "  # how health's drains are told apart from everyone else's


class HealthCheck(Model):
    name: DnsLabel
    command: str
    kind: Literal["passive", "active"] = "passive"
    interval_seconds: int = Field(DEFAULT_INTERVAL, ge=1, le=MAX_SECONDS)
    timeout_seconds: int = Field(DEFAULT_TIMEOUT, ge=1, le=MAX_SECONDS)

    @field_validator("command")
    @classmethod
    def _something_to_run(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; give the bash command that checks the node")
        return value


class HealthSpec(Model):
    # replace: fluxhop's operator also evicts a drained rank's idle pod and
    # taints its node, so the Job's new pod runs elsewhere (operator/health_watch.py)
    on_failure: Literal["drain", "replace"] = "drain"
    max_replacements: int = Field(1, ge=1, le=1000)  # pods being replaced at once, at most
    checks: list[HealthCheck] = Field(min_length=1)

    @field_validator("checks")
    @classmethod
    def _names_once(cls, value: list[HealthCheck]) -> list[HealthCheck]:
        names = [check.name for check in value]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"name {repeated[0]} is used twice; name each check once")
        return value


def parse_health_check(item: str) -> dict[str, str]:
    """``NAME=COMMAND`` for --health-check (spec.health.checks[])."""
    name, sep, command = item.partition("=")
    if not sep or not command.strip():
        raise InputError(f"--health-check {item!r}: write it as NAME=COMMAND (a bash command)")
    problem = dns_label_problem(name)
    if problem:
        raise InputError(f"--health-check {item!r}: {problem}")
    return {"name": name, "command": command}


def place_health(spec: dict[str, Any], checks: Sequence[str], interval: int | None) -> None:
    """The health flags written into a MiniCluster document's ``spec``:
    --health-check adds checks, --health-interval times every check that
    does not set its own interval."""
    health = spec.get("health")
    if (checks or interval is not None) and health is not None and not isinstance(health, dict):
        raise InputError(
            "--health-check/--health-interval: the file's spec.health is not a mapping"
        )
    if checks:
        health = spec.setdefault("health", {})
        given = health.get("checks") or []
        if not isinstance(given, list):
            raise InputError("--health-check: the file's spec.health.checks is not a list")
        health["checks"] = [*given, *(parse_health_check(c) for c in checks)]
    if interval is None:
        return
    if interval < 1:
        raise InputError(f"--health-interval must be 1 second or more, not {interval}")
    listed = ((spec.get("health") or {}).get("checks")) or []
    if not isinstance(listed, list) or not listed:
        raise InputError(
            "--health-interval: there is no health check to time; add --health-check NAME=COMMAND"
        )
    for check in listed:
        if isinstance(check, dict):
            check.setdefault("intervalSeconds", interval)
