"""Applying the autoscaling policy (workload/autoscale.py) to one MiniCluster:
read its instance (the metrics ``fluxhop status`` reads, one exec into rank
0), drain or undrain ranks in Flux, resize it the way ``fluxhop scale`` does
(so Kueue's rules hold). ``fluxhop autoscale`` runs it in a loop; each step
is one decision and says why."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InstanceError
from fluxhop.flux import idset
from fluxhop.workload.autoscale import DRAIN_REASON, Decision, Policy, State, decide, observe
from fluxhop.workload.verbs import FluxVerbs

__all__ = ["Autoscaler"]


@dataclass
class Autoscaler:
    ops: MiniClusters
    inside: FluxVerbs
    name: str
    policy: Policy
    clock: Callable[[], float] = time.monotonic
    state: State = field(default_factory=State)

    def step(self) -> tuple[int, Decision]:
        """One decision, acted on: (the size before, the decision)."""
        root = self.ops.require(self.name)
        size = self.ops.status(root).size
        status = self.inside.status(self.name)
        if status.metrics is None:  # say why: the broker starting, a timeout, no metrics.py
            raise InstanceError(
                f"MiniCluster {self.name}: no metrics from its instance "
                f"({status.metrics_error or 'it has no metrics.py; recreate it with this fluxhop'})"
            )
        seen = observe(size, status.metrics)
        decision, self.state = decide(self.policy, seen, self.state, self.clock())
        if decision.undrain:
            self._flux("undrain", [idset.encode(decision.undrain)])
        if decision.drain:  # --update: a rank an admin drained keeps its reason
            self._flux("drain", ["--update", idset.encode(decision.drain), DRAIN_REASON])
        if decision.size != size:
            self.ops.scale(root, decision.size)
        return size, decision

    def _flux(self, verb: str, args: list[str]) -> None:
        self.inside.run(self.name, ["resource", verb, *args], what=f"flux resource {verb}")
