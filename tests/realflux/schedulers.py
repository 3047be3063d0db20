"""The two schedulers a MiniCluster can run, as a test parameter.

Fluxion (flux-sched) is what real MiniClusters load: every Flux view image,
the Flux Operator and fluxhop's own entrypoint. ``sched-simple`` is what
``spec.flux.scheduler.simple`` asks for. Where a behaviour can differ by
scheduler (pending jobs and growth, queue policies, GPUs, ``--exclusive``,
MPI placement) a test takes the ``scheduler`` fixture (tests/conftest.py)
and runs under both; the Fluxion run skips, with the reason, where the
flux-core found does not have it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FLUXION", "SCHEDULERS", "SIMPLE", "Scheduler"]


@dataclass(frozen=True)
class Scheduler:
    name: str
    module: str  # the module that provides the "sched" service in the instance
    simple: bool

    def flux(self, **flux: Any) -> dict[str, Any]:
        """``spec.flux`` with this scheduler chosen (``flux`` holds the rest)."""
        scheduler = {**flux.pop("scheduler", {}), "simple": self.simple}
        return {**flux, "scheduler": scheduler}

    def loaded(self, module_list: str) -> bool:
        """Whether ``flux module list`` says this scheduler provides ``sched``."""
        return any(
            line.split()[0] == self.module and "sched" in line.split()[-1].split(",")
            for line in module_list.splitlines()[1:]
            if line.split()
        )

    def __str__(self) -> str:
        return self.name


FLUXION = Scheduler("fluxion", "sched-fluxion-qmanager", simple=False)
SIMPLE = Scheduler("sched-simple", "sched-simple", simple=True)
SCHEDULERS = (FLUXION, SIMPLE)
