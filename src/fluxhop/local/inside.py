"""Flux verbs on a local MiniCluster: rank 0's broker is on this machine, so
the command runs here, beside it (its run/env.sh gives the flux and the URI),
with no kubectl in between."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from fluxhop.workload.verbs import FluxVerbs, Runner

__all__ = ["LocalInside"]

# (name, submit?) -> rank 0's Flux root; raises in one line when it cannot take commands
Locate = Callable[[str, bool], str]


class LocalInside(FluxVerbs):
    def __init__(self, locate: Locate, *, runner: Runner = subprocess.run) -> None:
        super().__init__(runner)
        self.locate = locate

    def where(self, name: str, *, submit: bool, stdin: bool) -> tuple[list[str], str | None]:
        return [], self.locate(name, submit)
