"""The operator's view of spec.health (issue #37): a MiniCluster resource
with health checks is looked at every few seconds (a kopf timer,
operator/timers.py). Rank 0's metrics say each check's last results and
which ranks health drained; what changed is written to ``status.health``
and said as events on the resource:

* ``Drained`` (Warning): a rank health drained, with its reason;
* ``Recovered`` (Normal): a rank health had drained is no longer (its
  checks pass again, or someone lifted the drain);
* ``Replaced`` (Warning), with ``onFailure: replace``: the pod of a rank
  health drained, with no job on it, evicted (the Job makes another) from a
  node now tainted ``fluxhop.flux-framework.org/unhealthy=<MiniCluster>:
  NoSchedule`` so that the new pod runs elsewhere; the reason is on the pod
  (an annotation) and on the node. Never rank 0's pod (the instance would
  go with it), never a pod younger than its checks' first round (a new
  pod's runner lifts the drain it inherits), never more than
  ``maxReplacements`` ranks without a running pod at once.

The drains themselves are made in the pods (render/templates/health.sh):
the operator only reports them, so a MiniCluster without the operator
heals the same. ``health_status``, ``changes`` and ``to_replace`` are
pure; ``look`` does one look's I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from time import time
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.cluster.autoscale_actions import exec_metrics
from fluxhop.cluster.inside import PodInside
from fluxhop.cluster.scrape import scrape_json
from fluxhop.errors import FluxhopError, IdsetError, SpecError
from fluxhop.flux import idset
from fluxhop.operator.resource import HEALTH_STATUS, operated, post_event, spec_of
from fluxhop.render.targets import Target
from fluxhop.spec.health import REASON_PREFIX
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.marks import JOB_NAME
from fluxhop.workload.root import Root
from fluxhop.workload.status import completion_index

__all__ = [
    "HEALTH_STATUS", "REPLACED", "UNHEALTHY", "Event", "Replacement", "changes", "health_status",
    "look", "to_replace",
]  # fmt: skip

UNHEALTHY = "fluxhop.flux-framework.org/unhealthy"  # the taint a replaced pod's node gets
REPLACED = "fluxhop.flux-framework.org/replaced"  # on the pod and the node: why
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


@dataclass(frozen=True)
class Replacement:
    rank: int
    pod: str
    node: str
    reason: str


def _started(pod: dict[str, Any]) -> float | None:
    stamp = (pod.get("status") or {}).get("startTime")
    if not stamp:
        return None
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def to_replace(
    spec: MiniCluster, status: dict[str, Any], metrics: dict[str, Any],
    pods: list[dict[str, Any]], now: float,
) -> list[Replacement]:  # fmt: skip
    """With onFailure: replace, the pods to replace now: a rank health
    drained, with no job on it (metrics.py's allocated ranks), whose pod runs
    and is older than its checks' first round, while fewer than
    maxReplacements ranks have no running pod."""
    health = spec.spec.health
    if health is None or health.on_failure != "replace":
        return []
    sched = metrics.get("sched") or {}
    busy_text = sched["allocated"] if "allocated" in sched else (metrics.get("ranks") or {}).get(
        "allocated", "")  # fmt: skip
    try:
        busy = set(idset.decode(str(busy_text))) if busy_text else set()
    except IdsetError:
        return []
    grace = max(c.interval_seconds + c.timeout_seconds for c in health.checks) + 10
    running: dict[int, dict[str, Any]] = {}
    for pod in pods:
        index = completion_index(pod)
        if index is not None and _running(pod):
            running[index] = pod
    room = health.max_replacements - max(spec.spec.size - len(running), 0)
    chosen: list[Replacement] = []
    for drained in status.get("drained") or []:
        rank = int(drained["rank"])
        found = running.get(rank)
        if rank == 0 or rank in busy or found is None or len(chosen) >= room:
            continue
        started = _started(found)
        node = (found.get("spec") or {}).get("nodeName")
        if started is None or now - started < grace or not node:
            continue
        chosen.append(Replacement(rank, found["metadata"]["name"], node, str(drained["reason"])))
    return chosen


def _running(pod: dict[str, Any]) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return status.get("phase") == "Running" and not meta.get("deletionTimestamp")


Scrape = Callable[[dict[str, Any], int], dict[str, Any]]


def look(
    kube: Kube,
    cr: dict[str, Any],
    lead: dict[str, Any] | None,
    previous: dict[str, Any] | None = None,
    scrape: Scrape = scrape_json,
    now: float | None = None,
) -> dict[str, Any] | None:
    """One look at MiniCluster resource ``cr`` whose rank 0 runs in ``lead``:
    status.health written and events posted for what changed since
    ``previous`` (default: the resource's). The status.health it left, or
    None when it could not look (no rank 0 yet, no metrics: the next look
    tries again; a replacement the API refuses raises, the status written)."""
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
    if status != previous:
        try:
            kube.patch_status("MiniCluster", spec.name, {HEALTH_STATUS: status})
        except FluxhopError:
            return None  # the next look writes it, and says its events, again
        for kind, reason, message in changes(previous, status):
            _said(kube, cr, kind, reason, message)
    if spec.spec.health.on_failure == "replace" and status["drained"]:
        pods = kube.list("Pod", labels={JOB_NAME: spec.name})
        for chosen in to_replace(spec, status, metrics, pods, now if now is not None else time()):
            _replace(kube, cr, spec, chosen)
    return status


def _said(kube: Kube, cr: dict[str, Any], kind: str, reason: str, message: str) -> None:
    try:
        post_event(kube, cr, kind, reason, message)
    except FluxhopError:
        return  # an event the API refuses is lost, not the look


def _replace(kube: Kube, cr: dict[str, Any], spec: MiniCluster, chosen: Replacement) -> None:
    """Taint the node, say why on the node and the pod, evict the pod."""
    why = f"{kube.namespace}/{spec.name} rank {chosen.rank}: {chosen.reason}"
    node = kube.get("Node", chosen.node)
    if node is not None:
        taints = list((node.get("spec") or {}).get("taints") or [])
        if not any(t.get("key") == UNHEALTHY for t in taints):
            taint = {"key": UNHEALTHY, "value": spec.name, "effect": "NoSchedule"}
            # the whole list, at the version read: a taint added meanwhile is a conflict
            kube.merge_patch("Node", chosen.node, {
                "metadata": {"resourceVersion": node["metadata"]["resourceVersion"],
                             "annotations": {REPLACED: why}},
                "spec": {"taints": [*taints, taint]},
            })  # fmt: skip
    kube.merge_patch("Pod", chosen.pod, {"metadata": {"annotations": {REPLACED: chosen.reason}}})
    if kube.evict(chosen.pod):
        _said(kube, cr, "Warning", "Replaced",
              f"rank {chosen.rank}'s pod {chosen.pod} evicted from node {chosen.node} "
              f"({chosen.reason}); the node is tainted {UNHEALTHY}:NoSchedule")  # fmt: skip
