"""Applying the autoscaling policy (workload/autoscale.py) to one MiniCluster:
read its instance's metrics, drain or undrain ranks in Flux, then resize it
the way ``fluxhop scale`` does (so Kueue's rules hold). fluxhop's operator
(operator/autoscale_timer.py) and ``fluxhop autoscale`` (here: ``Autoscaler``)
reach the instance differently and make the same decision in ``act``.

Both keep the idle time the delay counts on the cluster, not in a process:
the operator in the resource's ``status.autoscale``, ``fluxhop autoscale``
in an annotation of the MiniCluster's root, so ``--once`` from a timer
waits out the delay like the loop does."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from fluxhop.cluster.inside import PodInside
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InstanceError
from fluxhop.flux import idset
from fluxhop.workload.autoscale import DRAIN_REASON, Decision, Policy, State, decide, observe
from fluxhop.workload.inside import METRICS_SCRIPT, parse_metrics
from fluxhop.workload.marks import AUTOSCALE_STATE, ROOT_KINDS
from fluxhop.workload.root import Root
from fluxhop.workload.status import running_lead

__all__ = ["Autoscaler", "Instance", "act", "exec_metrics", "state_of", "state_record"]


class Instance(Protocol):
    """One MiniCluster as the policy needs it."""

    def size(self) -> int:
        """The size asked for now."""

    def metrics(self) -> dict[str, Any]:
        """metrics.py's JSON (raises InstanceError, in one line, when unread)."""

    def flux(self, args: Sequence[str], *, what: str) -> None:
        """Run flux ARGS beside rank 0's broker."""

    def resize(self, size: int) -> None:
        """Ask for ``size`` nodes."""


def act(
    instance: Instance, policy: Policy, state: State, now: float
) -> tuple[int, Decision, State]:
    """One decision, acted on: (the size before, the decision, the next state)."""
    size = instance.size()
    seen = observe(size, instance.metrics())
    decision, state = decide(policy, seen, state, now)
    if decision.drain:  # --update: a rank an admin drained keeps its reason
        ranks = idset.encode(decision.drain)
        args = ["resource", "drain", "--update", ranks, DRAIN_REASON]
        instance.flux(args, what="flux resource drain")
    if decision.size != size:  # a shrink's ranks were drained by an earlier decision
        instance.resize(decision.size)
    if decision.undrain:  # after a growth's resize: its pods start meanwhile
        ranks = idset.encode(decision.undrain)
        instance.flux(["resource", "undrain", ranks], what="flux resource undrain")
    return size, decision, state


# --- the idle time, as it is kept on the cluster ----------------------------------------


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_of(record: Any) -> State:
    """The idle time a record says (``state_record``'s); none when unreadable."""
    try:
        since = datetime.strptime(str(record["idleSince"]), "%Y-%m-%dT%H:%M:%SZ")
        target = record["shrinkTo"]
    except (KeyError, TypeError, ValueError):
        return State()
    if not isinstance(target, int):
        return State()
    return State(since.replace(tzinfo=UTC).timestamp(), target)


def state_record(state: State) -> dict[str, Any]:
    """The idle time as JSON (to the second); {} when there is none."""
    if state.idle_since is None or state.target is None:
        return {}
    return {"idleSince": _stamp(state.idle_since), "shrinkTo": state.target}


# --- rank 0 through the API's exec ----------------------------------------------------


def exec_metrics(inside: PodInside, name: str) -> dict[str, Any]:
    """metrics.py's numbers, run once in rank 0's pod (one exec)."""
    script = f"{inside.root.config_dir}/{METRICS_SCRIPT}"
    args = ["python", script, "--once", "--json"]
    found, error = parse_metrics(inside.run(name, args, what="metrics.py"))
    if found is None:
        raise InstanceError(
            f"MiniCluster {name}: no metrics from its instance "
            f"({error or 'it has no metrics.py; recreate it with this fluxhop'})"
        )
    return found


@dataclass
class _Created:
    """A MiniCluster as ``fluxhop autoscale`` finds it for one decision: its
    root (one GET), its pods (one LIST), rank 0 through the API's exec."""

    ops: MiniClusters
    root: Root
    inside: PodInside

    @classmethod
    def find(cls, ops: MiniClusters, name: str) -> _Created:
        root = ops.require(name)
        lead = running_lead(ops.pods(root))
        if lead is None:
            raise InstanceError(f"MiniCluster {name}: rank 0 is not running")
        return cls(ops, root, PodInside(ops.kube, root, lead["metadata"]["name"]))

    def size(self) -> int:
        return self.root.size

    def metrics(self) -> dict[str, Any]:
        return exec_metrics(self.inside, self.root.name)

    def flux(self, args: Sequence[str], *, what: str) -> None:
        self.inside.run(self.root.name, list(args), what=what)

    def resize(self, size: int) -> None:
        self.root = self.ops.scale(self.root, size)

    def state(self) -> State:
        annotations = self.root.obj["metadata"].get("annotations") or {}
        try:
            return state_of(json.loads(annotations.get(AUTOSCALE_STATE, "{}")))
        except ValueError:
            return State()

    def remember(self, state: State) -> None:
        """Record the idle time on the root, if it changed (null removes it)."""
        if state == self.state():
            return
        record = state_record(state)
        value = json.dumps(record, sort_keys=True) if record else None
        patch = {"metadata": {"annotations": {AUTOSCALE_STATE: value}}}
        self.ops.kube.merge_patch(ROOT_KINDS[self.root.target], self.root.name, patch)


@dataclass
class Autoscaler:
    """``fluxhop autoscale``: one decision per step, its idle time on the root."""

    ops: MiniClusters
    name: str
    policy: Policy
    clock: Callable[[], float] = time.time

    def step(self) -> tuple[int, Decision]:
        """One decision, acted on: (the size before, the decision)."""
        instance = _Created.find(self.ops, self.name)
        size, decision, state = act(instance, self.policy, instance.state(), self.clock())
        instance.remember(state)
        return size, decision
