"""The autoscaling policy (issue #24): from what a Flux instance says of its
queue and its ranks, the size a MiniCluster should have and what to do in
Flux first. Pure: an observation and the last state in, a decision and the
next state out; the operator and ``fluxhop autoscale`` do the I/O.

* **Grow** when pending jobs cannot all start for want of nodes: to the
  smallest size that fits the largest pending request and the nodes in use
  plus all that pending jobs ask for, never beyond ``maxSize``. Ranks this
  policy drained earlier are undrained first (a shrink in progress is off).
* **Shrink** when nodes stay idle past the delay: the target is the nodes in
  use (at least ``minSize``); the highest ranks above it are drained in Flux
  first, and the size drops only once no job runs on them. A job running on
  a drained rank keeps running until it ends: no job is killed by a
  scale-down. New work in the meantime (a pending job) cancels the shrink.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fluxhop.errors import IdsetError, InstanceError
from fluxhop.flux import idset

__all__ = ["DRAIN_REASON", "Decision", "Observation", "Policy", "State", "decide", "observe"]

DRAIN_REASON = "fluxhop autoscale: scaling down"  # how this policy's drains are told apart


@dataclass(frozen=True)
class Policy:
    min_size: int
    max_size: int
    scale_down_delay: float  # seconds the nodes above the target must stay idle


@dataclass(frozen=True)
class Observation:
    """A MiniCluster and its instance at one moment."""

    size: int  # the size asked for (spec.size)
    allocated: frozenset[int]  # ranks running a job
    pending_nodes: int  # nodes all pending jobs (not held) ask for
    pending_max_nodes: int  # the largest of those requests
    drained: frozenset[int] = frozenset()  # ranks this policy drained (DRAIN_REASON)
    drained_by_others: frozenset[int] = frozenset()  # an admin's drains: never undone here
    online: frozenset[int] | None = None  # ranks whose broker is up (None: not known)
    # ranks a health check's job runs on (spec.health's active checks): idle
    # for the policy, but a shrink waits for the check to end
    checking: frozenset[int] = frozenset()


@dataclass(frozen=True)
class State:
    """What a decision needs from the one before: since when the nodes above
    the target have been idle (None: they are not)."""

    idle_since: float | None = None
    target: int | None = None  # the size the idle time counts toward


@dataclass(frozen=True)
class Decision:
    size: int  # the size to ask for (the current one: no change)
    reason: str
    drain: frozenset[int] = field(default_factory=frozenset)  # ranks to drain now
    undrain: frozenset[int] = field(default_factory=frozenset)  # ranks to undrain now
    # seconds left before idle nodes are drained (the reason stays the same
    # while it counts down, so a status holding it is not rewritten each time)
    wait: float | None = None

    @property
    def acts(self) -> bool:
        return bool(self.drain or self.undrain)


def _ids(text: str) -> frozenset[int]:
    return frozenset(idset.decode(text)) if text else frozenset()


def _nodes_for(cores: int, metrics: dict[str, Any]) -> int:
    """Nodes that ``cores`` need on this instance's nodes (all alike here):
    a job that asks only for cores (``flux submit -n64``) has no node count."""
    nodes, all_cores = (sum(metrics[key].values()) for key in ("nodes", "cores"))
    per_node = all_cores // nodes if nodes and all_cores else 0
    return -(-cores // per_node) if per_node else 0


def observe(size: int, metrics: dict[str, Any] | None) -> Observation:
    """The observation in metrics.py's JSON (``fluxhop status``'s ``metrics``)
    of a MiniCluster asking for ``size`` nodes. Pending asks count as the
    larger of their nodes and the nodes their cores need."""
    try:
        ranks = metrics["ranks"] if metrics else None
        if not isinstance(ranks, dict) or metrics is None:
            raise KeyError("ranks")
        drains = [(d["reason"] == DRAIN_REASON, _ids(d["ranks"])) for d in ranks["drain"]]
        # the jobs that wait for resources (metrics.py's "sched"); an older
        # metrics.py has only all pending jobs, those waiting on a dependency too
        asks = metrics.get("sched") or {
            "nodes": metrics["pending_nodes"],
            "cores": metrics["pending_cores"],
            "max_nodes": metrics["pending_max_nodes"],
            "max_cores": metrics["pending_max_cores"],
        }
        pending = max(int(asks["nodes"]), _nodes_for(int(asks["cores"]), metrics))
        largest = _nodes_for(int(asks["max_cores"]), metrics)
        # ranks running a job, from the same job-list answer as the asks where the
        # metrics.py has it: a job just scheduled is then not counted twice
        allocated = asks["allocated"] if "allocated" in asks else ranks["allocated"]
        return Observation(
            size=size,
            allocated=_ids(allocated),
            pending_nodes=pending,
            pending_max_nodes=max(int(asks["max_nodes"]), largest),
            drained=frozenset().union(*(r for ours, r in drains if ours)),
            drained_by_others=frozenset().union(*(r for ours, r in drains if not ours)),
            online=_ids(ranks["online"]),
            checking=_ids(str(asks.get("checking") or "")),
        )
    except (KeyError, TypeError, ValueError, AttributeError, IdsetError) as err:
        raise InstanceError(
            f"the instance's metrics lack what autoscaling reads ({err}); is its metrics.py "
            "older than this fluxhop? recreate the MiniCluster"
        ) from None


def _needed(policy: Policy, seen: Observation) -> int:
    """The size that runs every job in use and pending at once, within bounds."""
    busy = len(seen.allocated)
    wanted = max(seen.pending_max_nodes, busy + seen.pending_nodes, policy.min_size)
    return min(wanted, policy.max_size)


def _grow(policy: Policy, seen: Observation, needed: int) -> Decision:
    # not a rank above the size whose broker is still up: its pod is leaving
    # (a shrink just now), and a job placed there would go with it
    undrain = frozenset(r for r in seen.drained if r < seen.size) | _gone(seen)
    if needed <= seen.size:
        reason = f"pending jobs fit in {seen.size} nodes"
        if undrain:
            reason += f"; undraining ranks {_ranks(undrain)} for them"
        return Decision(seen.size, reason, undrain=undrain)
    reason = (
        f"{seen.pending_nodes} node(s) asked for by pending jobs (the largest {seen.pending_max_nodes}), "
        f"{len(seen.allocated)} in use: growing to {needed}"
    )
    if seen.pending_max_nodes > policy.max_size:
        reason += (
            f"; a job asks for {seen.pending_max_nodes} nodes, more than maxSize {policy.max_size}"
        )
    return Decision(needed, reason, undrain=undrain)


def _in_use(policy: Policy, seen: Observation, state: State) -> int:
    """The nodes to keep: those running a job - but while a shrink is under
    way, not the ranks it drained: they leave once their jobs end, so such a
    job ending lets the shrink go on without another delay. (Drains of this
    policy with no shrink under way are leftovers, undone when steady.)"""
    leaving = seen.drained if state.target is not None else frozenset()
    return max(policy.min_size, len(seen.allocated - leaving))


def _shrink(policy: Policy, seen: Observation, state: State, now: float) -> tuple[Decision, State]:
    target = _in_use(policy, seen, state)
    # nodes that just became idle have not waited yet: fewer nodes running a
    # job than the target counted restarts the delay (a job on a drained rank
    # still counts here: its rank leaves, no other node became idle)
    since = state.idle_since
    running = max(policy.min_size, len(seen.allocated))
    if since is None or state.target is None or running < state.target:
        since = now
    waited = now - since
    if waited < policy.scale_down_delay:
        idle = seen.size - target
        return (
            Decision(
                seen.size,
                f"{idle} node(s) idle; shrinking to {target} once idle for "
                f"{policy.scale_down_delay:g}s",
                wait=policy.scale_down_delay - waited,
            ),
            State(since, target),
        )
    leaving = frozenset(range(target, seen.size))
    drain = leaving - seen.drained - seen.drained_by_others  # drained already, whoever did
    busy = leaving & (seen.allocated | seen.checking)
    if drain or busy:
        why = f"draining ranks {_ranks(leaving)} to shrink to {target}"
        if busy:
            why += f"; waiting for the job(s) on ranks {_ranks(busy)} to end"
        return Decision(seen.size, why, drain=drain), State(since, target)
    return Decision(
        target, f"ranks {_ranks(leaving)} drained and idle: shrinking to {target}"
    ), State()


def decide(policy: Policy, seen: Observation, state: State, now: float) -> tuple[Decision, State]:
    """What to do about ``seen`` at time ``now`` (seconds, any clock)."""
    size = min(max(seen.size, policy.min_size), policy.max_size)
    if size != seen.size:  # outside the bounds (edited by hand): back inside first
        return Decision(
            size, f"size {seen.size} is outside {policy.min_size}-{policy.max_size}"
        ), State()
    if seen.pending_nodes > 0:
        return _grow(policy, seen, _needed(policy, seen)), State()
    if _in_use(policy, seen, state) < seen.size:
        return _shrink(policy, seen, state, now)
    undrain = frozenset(r for r in seen.drained if r < seen.size) | _gone(seen)
    reason = "every node in use" if seen.allocated else f"at minSize {policy.min_size}"
    return replace(Decision(seen.size, reason), undrain=undrain), State()


def _gone(seen: Observation) -> frozenset[int]:
    """Ranks a finished shrink drained whose brokers have left: undrained
    now, while no job can land on them, so that a growth finds them ready
    and needs no undrain between its resize and its job."""
    if seen.online is None:
        return frozenset()
    return frozenset(r for r in seen.drained if r >= seen.size and r not in seen.online)


def _ranks(ranks: frozenset[int]) -> str:
    ordered = sorted(ranks)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1:
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))
