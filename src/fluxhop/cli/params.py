"""Click parameter types: what Kubernetes names, seconds, counts and URLs,
checked when the command line is read, before anything is rendered or sent
(a ``..`` in a NAME would otherwise walk API paths; a ``nan`` interval would
reach the cluster before it was read)."""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable
from typing import Any

import click

from fluxhop.errors import shown
from fluxhop.spec.names import dns_label_problem
from fluxhop.spec.rules import dns_subdomain_problem

__all__ = ["ABSOLUTE", "COUNT", "DOMAIN", "FILE", "KUBE_NAME", "URL", "Seconds"]


class _Checked(click.ParamType):
    def __init__(self, name: str, problem: Callable[[str], str | None]) -> None:
        self.name = name
        self.problem = problem

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        found = self.problem(text)
        if found:
            self.fail(f"{shown(text)} {found}", param, ctx)
        return text


def _absolute_problem(text: str) -> str | None:
    return None if text.startswith("/") else "is not an absolute path"


KUBE_NAME = _Checked("name", dns_label_problem)
DOMAIN = _Checked("domain", dns_subdomain_problem)
ABSOLUTE = _Checked("path", _absolute_problem)


class Seconds(click.ParamType):
    """A finite number of seconds above ``least`` (or at least it, with
    ``inclusive``): click's FloatRange lets ``nan`` and ``inf`` through."""

    name = "seconds"

    def __init__(self, least: float = 0.0, *, inclusive: bool = False) -> None:
        self.least = least
        self.inclusive = inclusive

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{shown(str(value))} is not a number of seconds", param, ctx)
        bound = "at least" if self.inclusive else "more than"
        if (
            not math.isfinite(number)
            or number < self.least
            or (number == self.least and not self.inclusive)
        ):
            self.fail(
                f"{shown(str(value))}: give a number of seconds {bound} {self.least:g}", param, ctx
            )
        return number


class _Url(click.ParamType):
    """An http URL with a host, a port and a path: what the operator can
    serve its probes on (kopf reads it with urllib and binds host:port)."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        parsed = urllib.parse.urlsplit(text)
        try:
            port = parsed.port
        except ValueError:
            port = None
        if parsed.scheme != "http" or not parsed.hostname or port is None or not parsed.path:
            self.fail(f"{shown(text)} is not a URL to serve on: write http://HOST:PORT/PATH "
                      "(e.g. http://0.0.0.0:8080/healthz)", param, ctx)  # fmt: skip
        return text


# a file fluxhop reads (- for stdin): one that is missing or a directory is
# refused naming the option, before anything is sent
FILE = click.Path(exists=True, dir_okay=False, allow_dash=True)
COUNT = click.IntRange(min=1)  # nodes, tasks, sizes: one or more
URL = _Url()
