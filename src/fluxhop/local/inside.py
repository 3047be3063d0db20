"""Flux verbs on a local MiniCluster: rank 0's broker is on this machine, so
the command runs here, beside it (its run/env.sh gives the flux and the URI),
with no kubectl in between. ``status`` runs fluxhop's own metrics.py (the
file the pods get in their ConfigMap) with that flux, in the same exec."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from fluxhop.render.scripts import TEMPLATES
from fluxhop.workload.inside import (
    METRICS_SCRIPT,
    STATUS_SCRIPT,
    InstanceStatus,
    parse_status,
    status_args,
)
from fluxhop.workload.verbs import FluxVerbs, Runner

__all__ = ["LocalInside"]

# (name, submit?) -> rank 0's Flux root; raises in one line when it cannot take commands
Locate = Callable[[str, bool], str]


class LocalInside(FluxVerbs):
    def __init__(
        self,
        locate: Locate,
        *,
        runner: Runner = subprocess.run,
        metrics_script: str | None = str(TEMPLATES / METRICS_SCRIPT),
    ) -> None:
        super().__init__(runner)
        self.locate = locate
        self.metrics_script = metrics_script

    def where(self, name: str, *, submit: bool, stdin: bool) -> tuple[list[str], str | None]:
        return [], self.locate(name, submit)

    def status(self, name: str) -> InstanceStatus:
        args = status_args(self.metrics_script)
        return parse_status(self.run(name, args, what="flux resource status", script=STATUS_SCRIPT))
