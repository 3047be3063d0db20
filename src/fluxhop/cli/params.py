"""Click parameter types for what Kubernetes names: checked when the command
line is read, before anything is rendered or sent (a ``..`` in a NAME would
otherwise walk API paths)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from fluxhop.errors import shown
from fluxhop.spec.names import dns_label_problem
from fluxhop.spec.rules import dns_subdomain_problem

__all__ = ["DOMAIN", "KUBE_NAME"]


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


KUBE_NAME = _Checked("name", dns_label_problem)
DOMAIN = _Checked("domain", dns_subdomain_problem)
