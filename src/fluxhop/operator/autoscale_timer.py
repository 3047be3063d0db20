"""The operator's autoscaling: a MiniCluster resource with ``spec.autoscale``
is looked at every few seconds (a kopf timer, operator/timers.py) and
sized to its Flux queue by the same policy as ``fluxhop autoscale``
(cluster/autoscale_actions.py).

* It reads rank 0's metrics over the pod network (``/metrics.json``: no API
  request), or, when the resource turned them off, through one exec.
* It drains and undrains ranks through the API's exec (no kubectl) and
  resizes by patching the resource's ``spec.size``, as the scale
  subresource and an HPA do; the reconcile then resizes the Job, refused
  like ``fluxhop scale`` where Kueue would restart it.
* Each decision is ``status.autoscale`` (desiredSize, reason, and the idle
  time the delay counts, so a restarted operator or another replica goes
  on where it stopped), written only when it changes; acting on one is an
  event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.cluster.autoscale_actions import act, exec_metrics, state_of, state_record
from fluxhop.cluster.inside import PodInside
from fluxhop.cluster.scrape import scrape_json
from fluxhop.errors import FluxhopError, InputError, InstanceError, SpecError
from fluxhop.operator.kueue import held_size_problem
from fluxhop.operator.resource import AUTOSCALE_STATUS, operated, post_event, spec_of
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.autoscale import Decision, Policy, State
from fluxhop.workload.root import Root

__all__ = ["Tick", "autoscale", "policy_of", "waited"]

Scrape = Callable[[dict[str, Any], int], dict[str, Any]]
WAITING = "waiting for rank 0 to run"
NO_DECISION = "no decision: "


@dataclass
class Tick:
    """What one look did: its decision (None: none was made) and its writes."""

    decision: Decision | None = None
    writes: list[str] = field(default_factory=list)
    status: dict[str, Any] | None = None  # status.autoscale as this look left it
    generation: int | None = None  # the resource's, after this look resized it


def policy_of(spec: MiniCluster) -> Policy | None:
    wanted = spec.spec.autoscale
    if wanted is None:
        return None
    return Policy(spec.spec.min_size or 1, spec.spec.max_nodes, wanted.scale_down_delay_seconds)


def waited(
    cr: dict[str, Any],
    namespace: str,
    pod: dict[str, Any],
    after: str | None,
    *,
    now: float,
    most: float,
    scrape: Callable[..., dict[str, Any]] = scrape_json,
) -> tuple[Scrape, str | None] | None:
    """Wait at rank 0 for its queue to change - at most ``most`` seconds, and
    no longer than the scale-down delay has left to run - then the metrics
    it answered with, as the look's scrape, and their version. None where
    the metrics are not served (read by exec) or the spec is not valid."""
    try:
        spec = spec_of(cr, namespace)
    except SpecError:
        return None
    served, policy = operated(spec).spec.metrics, policy_of(spec)
    if not served.enabled or policy is None:
        return None
    idle = state_of((cr.get("status") or {}).get(AUTOSCALE_STATUS) or {}).idle_since
    left = most if idle is None else idle + policy.scale_down_delay - now
    if left <= 0:  # the delay has run out: what the shrink waits for now is a job's end
        left = most
    try:
        found = scrape(pod, served.port, after=after, wait=min(most, left))
    except InstanceError as err:
        failure = err

        def failing(pod: dict[str, Any], port: int) -> dict[str, Any]:
            raise failure

        return failing, after
    version = found.get("version")
    return (lambda pod, port: found), str(version) if version else None


def recorded(size: int, reason: str, state: State) -> dict[str, Any]:
    """status.autoscale for a decision (no clock in it but the idle start)."""
    return {"desiredSize": size, "reason": reason, **state_record(state)}


@dataclass
class Operated:
    """A MiniCluster fluxhop's operator runs, as the policy needs it."""

    kube: Kube
    cr: dict[str, Any]
    spec: MiniCluster
    lead: dict[str, Any]
    scrape: Scrape
    timeout: float = 60
    inside: PodInside = field(init=False)
    generation: int | None = None  # after a resize

    def __post_init__(self) -> None:
        root = Root(Target.MINICLUSTER, self.cr)
        self.inside = PodInside(
            self.kube, root, self.lead["metadata"]["name"], timeout=self.timeout
        )

    def size(self) -> int:
        return self.spec.spec.size

    def metrics(self) -> dict[str, Any]:
        served = operated(self.spec).spec.metrics
        if served.enabled:
            return self.scrape(self.lead, served.port)
        return exec_metrics(self.inside, self.spec.name)

    def flux(self, args: Sequence[str], *, what: str) -> None:
        self.inside.run(self.spec.name, list(args), what=what)

    def resize(self, size: int) -> None:
        job = self.kube.get("Job", self.spec.name)
        problem = (Root(Target.JOB, job).resize_problem() or held_size_problem(self.spec, job)
                   if job else None)  # fmt: skip
        if problem is not None:  # Kueue: as fluxhop scale and the reconcile refuse it
            raise InputError(f"cannot resize to {size}: {problem}")
        patched = self.kube.merge_patch("MiniCluster", self.spec.name, {"spec": {"size": size}})
        self.generation = int(patched["metadata"].get("generation", 0))


def _events_for(before: int, decision: Decision) -> list[tuple[str, str]]:
    said = []
    if decision.undrain:
        said.append(("Undrained", decision.reason))
    if decision.drain:
        said.append(("Draining", decision.reason))
    if decision.size > before:
        said.append(("ScaledUp", f"{before} -> {decision.size}: {decision.reason}"))
    elif decision.size < before:
        said.append(("ScaledDown", f"{before} -> {decision.size}: {decision.reason}"))
    return said


def _ended(cr: dict[str, Any]) -> bool:
    conditions = (cr.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions
    )


def autoscale(
    kube: Kube,
    cr: dict[str, Any],
    *,
    now: float,
    lead: Callable[[], dict[str, Any] | None],
    scrape: Scrape = scrape_json,
    previous: dict[str, Any] | None = None,
) -> Tick:
    """One look at MiniCluster resource ``cr`` (``now``: seconds since the epoch;
    ``previous``: its status.autoscale, when the caller knows it better than
    ``cr`` - the operator's watch may not have brought its last write yet)."""
    tick = Tick()
    try:
        spec = spec_of(cr, kube.namespace)
    except SpecError:
        return tick  # the reconcile says why, on the resource
    policy = policy_of(spec)
    if policy is None or _ended(cr):
        return tick
    if previous is None:
        previous = (cr.get("status") or {}).get(AUTOSCALE_STATUS) or {}
    tick.status = previous
    pod = lead()
    if pod is None:
        _record(kube, cr, previous, recorded(spec.spec.size, WAITING,
                                             state_of(previous)), tick)  # fmt: skip
        return tick
    instance = Operated(kube, cr, spec, pod, scrape)
    try:
        before, decision, state = act(instance, policy, state_of(previous), now)
    except FluxhopError as err:
        tick.generation = instance.generation  # a resize may have gone through first
        status = recorded(spec.spec.size, f"{NO_DECISION}{err}", state_of(previous))
        # a warning once it had decided before: not while its instance starts
        decided = not str(previous.get("reason", WAITING)).startswith((NO_DECISION, WAITING))
        if _record(kube, cr, previous, status, tick) and decided:
            _said(kube, cr, "Warning", "AutoscaleStalled", str(err), tick)
        return tick
    tick.decision, tick.generation = decision, instance.generation
    _record(kube, cr, previous, recorded(decision.size, decision.reason, state), tick)
    for reason, message in _events_for(before, decision):
        _said(kube, cr, "Normal", reason, message, tick)
    return tick


def _said(kube: Kube, cr: dict[str, Any], kind: str, reason: str, message: str, tick: Tick) -> None:
    """An event; one the API refuses is lost, not the look (what it did stands)."""
    try:
        post_event(kube, cr, kind, reason, message)
    except FluxhopError:
        return
    tick.writes.append(f"event {reason}")


def _record(
    kube: Kube, cr: dict[str, Any], previous: dict[str, Any], status: dict[str, Any], tick: Tick
) -> bool:
    """Write status.autoscale if it changed; whether it did."""
    if status == previous:
        tick.status = status
        return False
    # the whole of status.autoscale: a merge patch of it replaces its keys, and
    # null removes the idle time a new decision no longer has
    patch = {**{k: None for k in previous}, **status}
    try:
        kube.patch_status("MiniCluster", cr["metadata"]["name"], {AUTOSCALE_STATUS: patch})
    except FluxhopError:
        return False  # the next look writes it again
    tick.status = status
    tick.writes.append("patch status.autoscale")
    return True
