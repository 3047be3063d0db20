"""What Kueue decided for a queued MiniCluster's Workload, and the job
controller's side of Kueue's contract, which fluxhop operator plays for a
kind Kueue does not know (render/kueue_workload.py makes the Workload).

Kueue's job framework (pkg/controller/jobframework/reconciler.go, v0.17)
does, for a job of its own kinds, what these functions let the operator do:

* start a job once its Workload is ``Admitted``, its pods given the node
  labels and tolerations of the ResourceFlavors the admission assigned
  (``podset.FromAssignment``) and what admission checks add to a pod set;
  with a topology assignment (topology-aware scheduling), its pods gated
  until Kueue's TopologyUngater, which finds them by the Workload's name in
  an annotation and the pod set label, gives each its domain;
* stop it when Kueue evicts the Workload (preempted, deactivated...): hold
  the job, its pods put back as they were, and once no pod runs release the
  quota (``UnsetQuotaReservationWithCondition``); nothing else releases it;
* finish the Workload when the job ends, so that its quota frees.

The status writes are JSON merge patches carrying the Workload's
resourceVersion: a Workload Kueue changed since it was read is refused
(409), and the next reconcile decides again from the new one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fluxhop.render.kueue_workload import POD_SET
from fluxhop.spec.kueue import KUEUE_PREFIX

__all__ = [
    "PODSET_LABEL",
    "Decision",
    "PodSetInfo",
    "decision",
    "finished_status",
    "pod_set_info",
    "released_status",
    "restored",
    "started",
    "template_patch",
]

PODSET_LABEL = "kueue.x-k8s.io/podset"  # on an admitted pod set's pods, as Kueue's jobs have it
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"  # how Kueue's TopologyUngater finds the pods
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"  # held until the ungater places each pod
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"  # implicit topology-aware
REQUEUED_ON = ("Preempted", "NodeFailures")  # evictions Kueue queues again at once
_SCHEDULING = ("nodeSelector", "tolerations", "schedulingGates")


def _conditions(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = (workload.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in found}


def _true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


@dataclass(frozen=True)
class Decision:
    """Kueue's answer so far: admitted (may run), evicted (must stop, with
    Kueue's reason and message), finished, or waiting (``waiting`` says for
    what, in Kueue's words)."""

    admitted: bool = False
    quota_reserved: bool = False
    evicted: tuple[str, str] | None = None
    finished: bool = False
    waiting: str = ""
    active: bool = True  # spec.active: false - deactivated, by hand or by Kueue
    finished_as: tuple[str, str] = ("", "")  # Finished's reason and message


def decision(workload: Mapping[str, Any]) -> Decision:
    conditions = _conditions(workload)
    evicted = None
    if _true(conditions, "Evicted"):
        condition = conditions["Evicted"]
        evicted = (str(condition.get("reason", "")), str(condition.get("message", "")))
    reserved = conditions.get("QuotaReserved", {})
    waiting = "" if _true(conditions, "QuotaReserved") else str(reserved.get("message", ""))
    return Decision(
        admitted=_true(conditions, "Admitted"),
        quota_reserved=_true(conditions, "QuotaReserved"),
        evicted=evicted,
        finished=_true(conditions, "Finished"),
        finished_as=(
            str(conditions.get("Finished", {}).get("reason", "")),
            str(conditions.get("Finished", {}).get("message", "")),
        ),
        waiting=waiting,
        active=(workload.get("spec") or {}).get("active", True) is not False,
    )


@dataclass
class PodSetInfo:
    """What an admission adds to the pod set's pods."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduling_gates: list[str] = field(default_factory=list)

    def merge(self, update: Mapping[str, Any], where: str) -> None:
        """Add an admission check's update; a key set twice to two values is
        an admission fluxhop cannot apply (Kueue fails such a job too)."""
        for key, mine in (("nodeSelector", self.node_selector), ("labels", self.labels),
                          ("annotations", self.annotations)):  # fmt: skip
            for name, value in (update.get(key) or {}).items():
                if mine.get(name, value) != value:
                    raise ValueError(
                        f"{where} sets {key} {name} to {value!r}, already {mine[name]!r}"
                    )
                mine[name] = value
        self.tolerations += [
            t for t in update.get("tolerations") or [] if t not in self.tolerations
        ]


def pod_set_info(
    workload: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> PodSetInfo:
    """The node labels and tolerations of the flavors the admission assigned
    the pod set (``flavors``: ResourceFlavor objects by name), and what its
    admission checks add. Raises ValueError on a conflict."""
    status = workload.get("status") or {}
    info = PodSetInfo(labels={PODSET_LABEL: POD_SET})
    assignments = (status.get("admission") or {}).get("podSetAssignments") or []
    for assignment in assignments:
        if assignment.get("name") != POD_SET:
            continue
        if assignment.get("topologyAssignment"):
            _topology(info, workload)
        for name in sorted(set((assignment.get("flavors") or {}).values())):
            flavor = (flavors.get(name) or {}).get("spec") or {}
            info.merge({"nodeSelector": flavor.get("nodeLabels"),
                        "tolerations": flavor.get("tolerations")}, f"ResourceFlavor {name}")  # fmt: skip
    for check in status.get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            if update.get("name") == POD_SET:
                info.merge(update, f"admission check {check.get('name')}")
    return info


def _topology(info: PodSetInfo, workload: Mapping[str, Any]) -> None:
    """A topology assignment: gated pods the ungater can find (Kueue's
    ``podset.FromAssignment`` and ``getPodSetsInfoFromStatus``)."""
    info.scheduling_gates.append(TOPOLOGY_GATE)
    info.annotations[WORKLOAD_ANNOTATION] = str(workload["metadata"]["name"])
    sets = (workload.get("spec") or {}).get("podSets") or []
    request = next((s.get("topologyRequest") or {} for s in sets if s.get("name") == POD_SET), {})
    if not any(key in request for key in ("required", "preferred", "unconstrained")):
        info.annotations[UNCONSTRAINED] = "true"


def started(template: Mapping[str, Any], info: PodSetInfo) -> dict[str, Any]:
    """The Job's pod template with the admission's additions."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **info.labels}
    if info.annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **info.annotations}
    pod = out.setdefault("spec", {})
    own = pod.get("nodeSelector") or {}
    for key, value in info.node_selector.items():
        if own.get(key, value) != value:  # Kueue's podset.Merge refuses it too
            raise ValueError(f"the admission sets nodeSelector {key} to {value!r}, the pods "
                             f"ask for {own[key]!r}")  # fmt: skip
    if info.node_selector:
        pod["nodeSelector"] = {**own, **info.node_selector}
    tolerations = list(pod.get("tolerations") or [])
    tolerations += [t for t in info.tolerations if t not in tolerations]
    if tolerations:
        pod["tolerations"] = tolerations
    gates = list(pod.get("schedulingGates") or [])
    gates += [{"name": g} for g in info.scheduling_gates if {"name": g} not in gates]
    if gates:
        pod["schedulingGates"] = gates
    return out


def restored(template: Mapping[str, Any], original: Mapping[str, Any]) -> dict[str, Any]:
    """The Job's pod template put back as it was made (``original``, the
    Workload's pod set template): the admission's node selector and
    tolerations go, and Kueue's labels and annotations (the API server's
    labels on the Job's template stay)."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    first = original.get("metadata") or {}
    for key in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(key) or {}).items() if not k.startswith(KUEUE_PREFIX)}
        kept |= {k: v for k, v in (first.get(key) or {}).items() if k.startswith(KUEUE_PREFIX)}
        if kept:
            meta[key] = kept
        else:
            meta.pop(key, None)
    pod = out.setdefault("spec", {})
    for key in _SCHEDULING:
        if key in (original.get("spec") or {}):
            pod[key] = copy.deepcopy(original["spec"][key])
        else:
            pod.pop(key, None)
    return out


def template_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``current`` into
    ``desired``: a key gone is null, a list is replaced whole. By hand: a
    merge patch's keys are kept unless nulled, and the Job's template has
    labels of the API server's (controller-uid, job-name) that must stay."""
    out: dict[str, Any] = {}
    for key in current.keys() - desired.keys():
        out[key] = None
    for key, value in desired.items():
        before = current.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            inner = template_patch(before, value)
            if inner:
                out[key] = inner
        elif value != before:
            out[key] = copy.deepcopy(value)
    return out


def _with(
    conditions: Iterable[Mapping[str, Any]], now: str, generation: int, *changes: dict[str, str]
) -> list[dict[str, Any]]:
    """``conditions`` with each of ``changes`` (type, status, reason,
    message) set; a transition time moves only when the status does."""
    out = [dict(c) for c in conditions]
    for change in changes:
        found = next((c for c in out if c.get("type") == change["type"]), None)
        if found is None:
            found = {"type": change["type"]}
            out.append(found)
        if found.get("status") != change["status"]:
            found["lastTransitionTime"] = now
        found.update(change, observedGeneration=generation)
    return out


def _status_patch(
    workload: Mapping[str, Any], now: str, *changes: dict[str, str]
) -> dict[str, Any]:
    meta = workload["metadata"]
    current = (workload.get("status") or {}).get("conditions") or []
    conditions = _with(current, now, int(meta.get("generation") or 0), *changes)
    return {
        "metadata": {"resourceVersion": meta["resourceVersion"]},
        "status": {"conditions": conditions},
    }


def released_status(workload: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The status patch that gives back an evicted Workload's quota once its
    pods are gone: no admission, QuotaReserved False, and Requeued (true for
    a preemption, which Kueue queues again at once; else Kueue decides)."""
    reason, message = decision(workload).evicted or ("Evicted", "evicted")
    patch = _status_patch(
        workload,
        now,
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message},
        {
            "type": "Admitted",
            "status": "False",
            "reason": "NoReservation",
            "message": "The workload has no reservation",
        },
        {
            "type": "Requeued",
            "status": "True" if reason in REQUEUED_ON else "False",
            "reason": reason,
            "message": message,
        },
    )
    patch["status"]["admission"] = None
    return patch


def finished_status(
    workload: Mapping[str, Any],
    now: str,
    *,
    succeeded: bool,
    message: str,
    reason: str | None = None,
) -> dict[str, Any]:
    """The status patch that finishes the Workload with its MiniCluster
    (``reason``: Kueue's own for how, e.g. FailedToStart)."""
    reason = reason or ("Succeeded" if succeeded else "Failed")
    return _status_patch(
        workload, now, {"type": "Finished", "status": "True", "reason": reason, "message": message}
    )
