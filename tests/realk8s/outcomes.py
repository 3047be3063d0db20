"""One MiniCluster resource reconciled to its end on the test cluster, and
what came of it, as each operator reports it: the Flux Operator (a Job's
Complete or Failed; rank 0's container's exit code; no MiniCluster status)
and fluxhop's (the MiniCluster's Succeeded or Failed and status.exitCode).
The tests that hold the two side by side read these records."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.conformance import CONFORMANCE
from tests.realk8s.api import Api, ApiError
from tests.realk8s.tools import eventually

MINICLUSTERS = "/apis/flux-framework.org/v1alpha2/namespaces/{}/miniclusters"
KINDS = {  # what an operator may make for a MiniCluster: kind -> list path
    "Job": "/apis/batch/v1/namespaces/{}/jobs",
    "Service": "/api/v1/namespaces/{}/services",
    "ConfigMap": "/api/v1/namespaces/{}/configmaps",
    "Secret": "/api/v1/namespaces/{}/secrets",
    "Pod": "/api/v1/namespaces/{}/pods",
}


@dataclass
class Outcome:
    """What one operator made of one MiniCluster."""

    finished: str  # "Succeeded" or "Failed" ("Restarting": rank 0 failed, restarts in place)
    exit_code: int | None  # as the operator reports it (None: it does not)
    rank0_log: str  # rank 0's application container's log
    worker_log: str = ""  # rank 1's
    events: list[str] = field(default_factory=list)  # "reason: message" of those on it
    objects: dict[str, list[str]] = field(default_factory=dict)  # kind -> names
    job: dict[str, Any] = field(default_factory=dict)
    configmaps: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)


def upstream_example(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONFORMANCE / "operator-examples" / name).read_text())


def job_finished(job: dict[str, Any]) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition["status"] == "True" and condition["type"] in ("Complete", "Failed"):
            return "Succeeded" if condition["type"] == "Complete" else "Failed"
    return None


def _resource_finished(resource: dict[str, Any]) -> str | None:
    for condition in (resource.get("status") or {}).get("conditions") or []:
        if condition["status"] == "True" and condition["type"] in ("Succeeded", "Failed"):
            return str(condition["type"])
    return None


def rank(api: Api, namespace: str, name: str, index: int) -> dict[str, Any] | None:
    """The pod of MiniCluster ``name`` with completion index ``index`` (the
    newest not being deleted, where one replaced another)."""
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")
    found = [
        pod for pod in pods["items"]
        if (pod["metadata"].get("annotations") or {}).get(
            "batch.kubernetes.io/job-completion-index") == str(index)
    ]  # fmt: skip
    found.sort(key=lambda p: ("deletionTimestamp" not in p["metadata"],
                              p["metadata"].get("creationTimestamp") or ""))  # fmt: skip
    return dict(found[-1]) if found else None


def rank0(api: Api, namespace: str, name: str) -> dict[str, Any] | None:
    return rank(api, namespace, name, 0)


def events_of(api: Api, namespace: str, name: str) -> list[str]:
    """The "reason: message" of every event on MiniCluster ``name``."""
    events = api.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [f"{e['reason']}: {e['message']}" for e in events
            if e["involvedObject"].get("name") == name
            and e["involvedObject"].get("kind") == "MiniCluster"]  # fmt: skip


def log_of(api: Api, namespace: str, pod: dict[str, Any] | None) -> str:
    """The application container's log of ``pod`` ("" for no pod)."""
    if pod is None:
        return ""
    return api.text(f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/log",
                    container=_application(pod))  # fmt: skip


def _application(pod: dict[str, Any]) -> str:
    """The application container: the first that is not a sidecar of ours."""
    return str(pod["spec"]["containers"][0]["name"])


def _terminated(pod: dict[str, Any] | None) -> dict[str, Any]:
    """How rank 0's application container last ended: now, or before a
    restart in place (the Flux Operator's pods restart OnFailure)."""
    if pod is None:
        return {}
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status["name"] == _application(pod):
            now = (status.get("state") or {}).get("terminated")
            return dict(now or (status.get("lastState") or {}).get("terminated") or {})
    return {}


def _flux_operator_finished(api: Api, namespace: str, name: str) -> str | None:
    """The Job's Complete or Failed; or "Restarting" once rank 0 failed and
    restarts in place (OnFailure, backoffLimit 100: the Job fails much later)."""
    job = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
    finished = job_finished(job)
    if finished is None and _terminated(rank0(api, namespace, name)).get("exitCode"):
        return "Restarting"
    return finished


def finished(api: Api, namespace: str, name: str, *, flux_operator: bool) -> str | None:
    """How MiniCluster ``name`` ended as its operator reports it (None: not yet)."""
    if flux_operator:
        return _flux_operator_finished(api, namespace, name)
    return _resource_finished(api.get(f"{MINICLUSTERS.format(namespace)}/{name}"))


def run(
    api: Api, namespace: str, document: dict[str, Any], *, flux_operator: bool, timeout: float = 300
) -> Outcome:
    """Create the MiniCluster and wait for its end as the operator reports it."""
    document = copy.deepcopy(document)
    name = document["metadata"]["name"]
    path = MINICLUSTERS.format(namespace)
    api.create(path, document)
    how = (
        "its Job Complete or Failed, or rank 0 restarting"
        if flux_operator
        else "Succeeded or Failed"
    )
    try:
        ended = eventually(f"{name}: {how}",
                           lambda: finished(api, namespace, name, flux_operator=flux_operator),
                           timeout, every=0.5)  # fmt: skip
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_states(api, namespace, name)}") from None
    return outcome(api, namespace, name, ended, flux_operator=flux_operator)


def _states(api: Api, namespace: str, name: str) -> str:
    """Where each pod of MiniCluster ``name`` is, and rank 0's log's tail."""
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")
    lines = []
    for pod in pods["items"]:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        states = {s["name"]: list(s.get("state") or {}) for s in statuses}
        lines.append(f"{pod['metadata']['name']}: {pod['status'].get('phase')} {states}")
    try:
        tail = log_of(api, namespace, rank0(api, namespace, name)).splitlines()[-30:]
    except ApiError as error:
        tail = [f"(no log: {error})"]
    return "\n".join([*lines, "rank 0's log:", *tail])


def outcome(api: Api, namespace: str, name: str, ended: str, *, flux_operator: bool) -> Outcome:
    """The record of MiniCluster ``name``, which ended as ``ended`` says."""
    path = MINICLUSTERS.format(namespace)
    job_path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
    resource = api.get(f"{path}/{name}")
    pod = rank0(api, namespace, name)
    log = log_of(api, namespace, pod)
    worker_log = log_of(api, namespace, rank(api, namespace, name, 1))
    if flux_operator:
        code = _terminated(pod).get("exitCode")  # the pod's: the MiniCluster has no status for it
    else:
        code = (resource.get("status") or {}).get("exitCode")
    objects = {
        kind: sorted(i["metadata"]["name"] for i in api.get(list_path.format(namespace))["items"]
                     if i["metadata"]["name"] != "kube-root-ca.crt")
        for kind, list_path in KINDS.items()
    }  # fmt: skip
    configmaps = [c for c in api.get(KINDS["ConfigMap"].format(namespace))["items"]
                  if c["metadata"]["name"] != "kube-root-ca.crt"]  # fmt: skip
    return Outcome(ended, code, log, worker_log, events_of(api, namespace, name), objects,
                   api.get(job_path), configmaps, resource)  # fmt: skip
