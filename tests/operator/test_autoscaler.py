"""operator/autoscaler.py's control flow with stand-ins for the cluster and
the instance (the real thing: tests/realk8s/test_autoscale.py): what it runs
in Flux, in which order, and when it resizes."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from fluxhop.operator.autoscaler import Autoscaler
from fluxhop.workload.autoscale import DRAIN_REASON, Policy


@dataclass
class Ops:
    size: int
    calls: list = field(default_factory=list)

    def require(self, name):
        return SimpleNamespace(name=name, max_size=4)

    def status(self, root):
        return SimpleNamespace(size=self.size)

    def scale(self, root, size):
        self.calls.append(("scale", size))
        self.size = size


@dataclass
class Inside:
    ops: Ops
    metrics: dict
    calls: list = field(default_factory=list)

    def status(self, name):
        return SimpleNamespace(metrics=self.metrics)

    def run(self, name, args, *, what):
        self.ops.calls.append(tuple(args))


def scaler(size, allocated="", drain=(), pending=0):
    ops = Ops(size)
    metrics = {"pending_nodes": pending, "pending_max_nodes": pending, "pending_cores": 0,
               "pending_max_cores": 0, "nodes": {"free": 4}, "cores": {"free": 16},
               "ranks": {"online": "0", "allocated": allocated, "drain": list(drain)}}  # fmt: skip
    return ops, Autoscaler(ops, Inside(ops, metrics), "work", Policy(1, 4, 0), clock=lambda: 0.0)


def test_growth_undrains_first_then_scales():
    ops, autoscaler = scaler(1, drain=[{"ranks": "1-3", "reason": DRAIN_REASON}], pending=4)
    assert autoscaler.step()[1].size == 4
    assert ops.calls == [("resource", "undrain", "1-3"), ("scale", 4)]


def test_a_shrink_drains_without_overwriting_an_admins_reason():
    ops, autoscaler = scaler(4, allocated="3")
    assert autoscaler.step()[1].size == 4
    assert ops.calls == [("resource", "drain", "--update", "1-3", DRAIN_REASON)]


def test_drained_and_idle_it_scales_down():
    ops, autoscaler = scaler(4, drain=[{"ranks": "1-3", "reason": DRAIN_REASON}])
    assert autoscaler.step()[1].size == 1
    assert ops.calls == [("scale", 1)]
