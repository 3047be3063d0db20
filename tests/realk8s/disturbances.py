"""A MiniCluster disturbed, and what its operator made of it (issue #35's
defects side by side): a new size once it has ended, a new command while it
runs, its lead pod evicted. Each step waits until the operator has seen the
change (an object it writes), then records what there is to compare; the
tests in test_two_operators.py hold the Flux Operator's record beside
fluxhop's."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.inside import online
from tests.realk8s.outcomes import KINDS, MINICLUSTERS, events_of, log_of, rank, rank0
from tests.realk8s.tools import eventually

FINISHED = "finished"
EDITED = "edited"
LOST = "lost-lead"


@dataclass
class Edited:
    """A MiniCluster edited, once the operator has seen the edit: a new size
    for one that has ended; a new command, then a new size, for a running one."""

    scripts_before: str  # its ConfigMaps' data, before the edit
    scripts_after: str
    parallelism: int  # its Job's, after
    completed: bool  # its Job's Complete condition, after
    pods: int  # its Job's pods, after
    resource: dict[str, Any]
    events: list[str]


def _condition(resource: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (resource.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def _scripts(admin: Api, namespace: str, name: str) -> str:
    maps = admin.get(KINDS["ConfigMap"].format(namespace))["items"]
    return "\n".join(value for m in maps if m["metadata"]["name"].startswith(f"{name}-")
                     for value in (m.get("data") or {}).values())  # fmt: skip


def edit(admin: Api, namespace: str, name: str, edits: list[dict[str, Any]], *,
         flux_operator: bool) -> Edited:  # fmt: skip
    """Apply ``edits`` (merge patches of the spec, the last a new size of
    3) and wait until the operator has seen them: the Flux Operator's Job
    grows to 3 (it resizes and says nothing else), fluxhop's resource says
    SpecApplied False."""
    path = f"{MINICLUSTERS.format(namespace)}/{name}"
    job_path = f"{KINDS['Job'].format(namespace)}/{name}"
    before = _scripts(admin, namespace, name)
    for change in edits:
        admin.patch(path, {"spec": change}, kind="merge")
    if flux_operator:
        eventually(f"{name}: the Flux Operator resized its Job",
                   lambda: admin.get(job_path)["spec"]["parallelism"] == 3, 120)  # fmt: skip
    else:
        eventually(f"{name}: fluxhop's operator refused the edit",
                   lambda: _condition(admin.get(path), "SpecApplied").get("status") == "False",
                   120)  # fmt: skip
    job = admin.get(job_path)
    pods = admin.get(KINDS["Pod"].format(namespace), labelSelector=f"job-name={name}")["items"]
    return Edited(before, _scripts(admin, namespace, name), job["spec"]["parallelism"],
                  any(c["type"] == "Complete" and c["status"] == "True"
                      for c in (job.get("status") or {}).get("conditions") or []),
                  len(pods), admin.get(path), events_of(admin, namespace, name))  # fmt: skip


def _running(admin: Api, namespace: str, name: str, index: int = 0) -> dict[str, Any]:
    return eventually(
        f"{name}: rank {index} running",
        lambda: (pod := rank(admin, namespace, name, index) or {}).get("status", {}).get("phase")
        == "Running" and pod, 180)  # fmt: skip


def edited_while_running(admin: Api, namespace: str, document: dict[str, Any], *,
                         flux_operator: bool) -> Edited:  # fmt: skip
    """``document`` (a long command, maxSize 3) created as EDITED; once rank
    0 runs, its command changed, then its size."""
    document = copy.deepcopy(document)
    document["metadata"]["name"] = EDITED
    admin.create(MINICLUSTERS.format(namespace), document)
    _running(admin, namespace, EDITED)
    containers = copy.deepcopy(document["spec"]["containers"])
    containers[0]["command"] = "echo edited"
    return edit(admin, namespace, EDITED, [{"containers": containers}, {"size": 3}],
                flux_operator=flux_operator)  # fmt: skip


@dataclass
class LostLead:
    """An interactive MiniCluster of 2 whose rank 0 pod was evicted once
    both brokers were up; recorded once both are up again around a new rank 0."""

    worker_log: str  # rank 1's, all of it
    rejoined_after: float  # seconds from the new rank 0 running to both brokers online


def lose_the_lead(
    cluster: LocalCluster, admin: Api, namespace: str, document: dict[str, Any]
) -> LostLead:
    """``document`` (interactive, size 2) created as LOST; once both brokers
    are online, rank 0's pod evicted; the Job makes another, and the worker
    joins its broker when it tries again (the Flux Operator's worker after
    its fixed `sleep 15`, fluxhop's after a short backoff)."""
    document = copy.deepcopy(document)
    document["metadata"]["name"] = LOST
    admin.create(MINICLUSTERS.format(namespace), document)
    eventually(f"{LOST}: both brokers online",
               lambda: online(cluster, admin, namespace, LOST) == 2, 180, every=1)  # fmt: skip
    lead = rank0(admin, namespace, LOST)
    assert lead is not None
    name = lead["metadata"]["name"]  # evicted (as a drain does): the Job replaces it
    admin.create(f"{KINDS['Pod'].format(namespace)}/{name}/eviction",
                 {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})  # fmt: skip

    def replaced() -> bool:
        now = rank0(admin, namespace, LOST)
        return now is not None and now["metadata"]["uid"] != lead["metadata"]["uid"]

    try:
        eventually(f"{LOST}: a new rank 0", replaced, 120)
    except AssertionError as error:
        pods = admin.get(KINDS["Pod"].format(namespace), labelSelector=f"job-name={LOST}")
        seen = [(p["metadata"]["name"], p["status"].get("phase"),
                 p["metadata"].get("deletionTimestamp")) for p in pods["items"]]  # fmt: skip
        job = admin.get(f"{KINDS['Job'].format(namespace)}/{LOST}")
        raise AssertionError(f"{error}; pods {seen}; job status {job.get('status')}") from None
    _running(admin, namespace, LOST)
    started = time.monotonic()
    try:
        eventually(f"{LOST}: both brokers online again",
                   lambda: online(cluster, admin, namespace, LOST) == 2, 180,
                   every=0.5)  # fmt: skip
    except AssertionError as error:
        worker = log_of(admin, namespace, rank(admin, namespace, LOST, 1))
        lead_log = log_of(admin, namespace, rank0(admin, namespace, LOST))
        raise AssertionError(f"{error}\n--- rank 1:\n{worker[-3000:]}\n--- the new rank 0:\n"
                             f"{lead_log[-3000:]}") from None  # fmt: skip
    rejoined = time.monotonic() - started
    return LostLead(log_of(admin, namespace, rank(admin, namespace, LOST, 1)), rejoined)
