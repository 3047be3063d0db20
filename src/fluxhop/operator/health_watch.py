"""The operator's view of spec.health (issue #37): a MiniCluster resource
with health checks is looked at every few seconds (a kopf timer,
operator/handlers.py). Rank 0's metrics say each check's last results and
which ranks health drained; what changed is written to ``status.health``
and said as events on the resource:

* ``Drained`` (Warning): a rank health drained, with its reason;
* ``Recovered`` (Normal): a rank health had drained is no longer (its
  checks pass again, or someone lifted the drain).

The drains themselves are made in the pods (render/templates/health.sh):
the operator only reports them, so a MiniCluster without the operator
heals the same. ``health_status`` and ``changes`` are pure; ``look`` does
one look's I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.cluster.autoscale_actions import exec_metrics
from fluxhop.cluster.inside import PodInside
from fluxhop.cluster.scrape import scrape_json
from fluxhop.errors import FluxhopError, IdsetError, SpecError
from fluxhop.flux import idset
from fluxhop.operator.reconcile import operated, post_event, spec_of
from fluxhop.render.targets import Target
from fluxhop.spec.health import REASON_PREFIX
from fluxhop.workload.root import Root

__all__ = ["HEALTH_STATUS", "Event", "changes", "health_status", "look"]

HEALTH_STATUS = "health"
Event = tuple[str, str, str]  # type (Normal, Warning), reason, message


def _drained(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranks health drained, each with its reason, by rank."""
    found: dict[int, str] = {}
    for drain in (metrics.get("ranks") or {}).get("drain") or []:
        reason = str(drain.get("reason") or "")
        if not reason.startswith(REASON_PREFIX):
            continue
        try:
            ranks = idset.decode(str(drain.get("ranks") or ""))
        except IdsetError:
            continue
        for rank in ranks:
            found[rank] = reason
    return [{"rank": rank, "reason": found[rank]} for rank in sorted(found)]


def health_status(metrics: dict[str, Any]) -> dict[str, Any]:
    """status.health from metrics.py's JSON: each check's ranks passing and
    failing (with the failing ranks and the lowest one's line), and the
    ranks health drained."""
    details = metrics.get("health") or {}
    checks = []
    for name, counts in sorted((metrics.get("health_checks") or {}).items()):
        check: dict[str, Any] = {
            "name": name,
            "passing": int(counts.get("pass", 0)),
            "failing": int(counts.get("fail", 0)),
        }
        failing = details.get(name) or {}
        if failing:
            check["failingRanks"] = str(failing.get("failing", ""))
            check["lastFailure"] = str(failing.get("line", ""))
        checks.append(check)
    return {"checks": checks, "drained": _drained(metrics)}


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[Event]:
    """The events between two status.health: a rank newly drained by
    health, a rank no longer (a reason that changed is no event)."""
    was = {d["rank"]: d["reason"] for d in before.get("drained") or []}
    now = {d["rank"]: d["reason"] for d in after.get("drained") or []}
    said: list[Event] = []
    for rank in sorted(set(now) - set(was)):
        said.append(("Warning", "Drained", f"rank {rank} drained: {now[rank]}"))
    for rank in sorted(set(was) - set(now)):
        said.append(
            ("Normal", "Recovered", f"rank {rank} is no longer drained by its health checks")
        )
    return said


Scrape = Callable[[dict[str, Any], int], dict[str, Any]]


def look(
    kube: Kube,
    cr: dict[str, Any],
    lead: dict[str, Any] | None,
    previous: dict[str, Any] | None = None,
    scrape: Scrape = scrape_json,
) -> dict[str, Any] | None:
    """One look at MiniCluster resource ``cr`` whose rank 0 runs in ``lead``:
    status.health written and events posted for what changed since
    ``previous`` (default: the resource's). The status.health it left, or
    None when it could not look (no rank 0 yet, no metrics: the next look
    tries again)."""
    try:
        spec = spec_of(cr, kube.namespace)
    except SpecError:
        return None  # the reconcile says why, on the resource
    if spec.spec.health is None or lead is None:
        return None
    if previous is None:
        previous = (cr.get("status") or {}).get(HEALTH_STATUS) or {}
    served = operated(spec).spec.metrics
    try:
        if served.enabled:
            metrics = scrape(lead, served.port)
        else:
            inside = PodInside(kube, Root(Target.MINICLUSTER, cr), lead["metadata"]["name"])
            metrics = exec_metrics(inside, spec.name)
    except FluxhopError:
        return None
    status = health_status(metrics)
    if status == previous:
        return status
    try:
        kube.patch_status("MiniCluster", spec.name, {HEALTH_STATUS: status})
    except FluxhopError:
        return None  # the next look writes it, and says its events, again
    for kind, reason, message in changes(previous, status):
        try:
            post_event(kube, cr, kind, reason, message)
        except FluxhopError:
            continue  # an event the API refuses is lost, not the look
    return status
