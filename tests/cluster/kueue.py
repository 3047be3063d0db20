"""Kueue, as far as the fake API server needs it: for a queued Job or JobSet
it keeps a Workload (labelled with the job's uid, as Kueue labels it) whose
conditions a test sets, admits the workload by unsuspending it, and (as
Kueue's job reconciler does after a change) stops an admitted Job whose size
no longer matches what it admitted. For a queued MiniCluster resource, whose
Workload fluxhop operator makes, it writes Kueue's decisions on that Workload
(reserve, hold, evict) and leaves the rest to the operator. Its writes of spec.suspend are updates
by its own field manager, so a later apply that sets another value conflicts."""

from __future__ import annotations

import uuid
from typing import Any

from tests.cluster.fakeapi import FakeAPIServer, now

__all__ = ["Kueue"]

MANAGER = "kueue"


class Kueue:
    def __init__(self, server: FakeAPIServer, namespace: str = "default") -> None:
        self.server = server
        self.namespace = namespace
        self.admitted: dict[tuple[str, str], int] = {}  # pod count Kueue admitted

    def _root(self, kind: str, name: str) -> dict[str, Any]:
        root = self.server.store.get((kind, self.namespace, name))
        if root is None:
            raise AssertionError(f"no {kind} {name} to queue")
        return root

    def pending(self, kind: str, name: str, message: str) -> dict[str, Any]:
        """The Workload Kueue makes for a workload it cannot admit yet."""
        with self.server.changed:
            root = self._root(kind, name)
            workload = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": f"{kind.lower()}-{name}-{uuid.uuid4().hex[:5]}",
                    "namespace": self.namespace,
                    "uid": str(uuid.uuid4()),
                    "creationTimestamp": now(),
                    "labels": {"kueue.x-k8s.io/job-uid": root["metadata"]["uid"]},
                },
                "spec": {"queueName": root["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]},
                "status": {
                    "conditions": [
                        {
                            "type": "QuotaReserved",
                            "status": "False",
                            "reason": "Pending",
                            "message": message,
                            "lastTransitionTime": now(),
                        }
                    ]
                },
            }
            self.server._put("Workload", self.namespace, workload, "ADDED")
            return workload

    def admit(self, kind: str, name: str) -> None:
        """Admit the workload: Kueue unsuspends the Job or JobSet."""
        with self.server.changed:
            root = self._root(kind, name)
            self._suspend(kind, name, root, False)
            self.admitted[(kind, name)] = _count(root)

    def preempt(self, kind: str, name: str) -> None:
        """Evict the admitted workload (a higher priority one needs its quota):
        Kueue suspends the Job, whose pods then go, and queues it again."""
        with self.server.changed:
            root = self._root(kind, name)
            self._suspend(kind, name, root, True)
            self.admitted.pop((kind, name), None)

    def observe(self, kind: str, name: str) -> None:
        """Kueue's reconcile of the job after a change: an admitted Job whose
        pod count differs from the admitted one matches no Workload, so Kueue
        stops it (suspends it; its pods go) to queue it again - unless it is an
        elastic job, which Kueue resizes in place (workload slices)."""
        with self.server.changed:
            root = self._root(kind, name)
            annotations = root["metadata"].get("annotations") or {}
            elastic = annotations.get("kueue.x-k8s.io/elastic-job") == "true"
            admitted = self.admitted.get((kind, name))
            if admitted is not None and _count(root) != admitted and not elastic:
                self._suspend(kind, name, root, True)
                del self.admitted[(kind, name)]
            elif admitted is not None:
                self.admitted[(kind, name)] = _count(root)

    # --- a queued MiniCluster resource's Workload (fluxhop operator makes it) ---------

    def workload(self, minicluster: str) -> dict[str, Any]:
        """The Workload fluxhop operator made for MiniCluster resource ``minicluster``."""
        found = [w for (k, ns, _), w in self.server.store.items() if k == "Workload"
                 and ns == self.namespace
                 and (w["metadata"].get("labels") or {}).get("fluxhop.io/minicluster") == minicluster]  # fmt: skip
        if len(found) != 1:
            raise AssertionError(f"{len(found)} Workloads of MiniCluster {minicluster}")
        return found[0]

    def _decide(self, workload: dict[str, Any], *conditions: dict[str, str]) -> None:
        status = workload.setdefault("status", {})
        kept = [c for c in status.get("conditions") or []
                if c["type"] not in {c2["type"] for c2 in conditions}]  # fmt: skip
        stamp = now()
        status["conditions"] = kept + [{**c, "lastTransitionTime": stamp} for c in conditions]
        self.server._bump("MODIFIED", "Workload", self.namespace, workload)

    def reserve(self, minicluster: str, *, cluster_queue: str = "cq", flavor: str = "default",
                checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
        """Admit it: its pod set to ``flavor``'s nodes (Admitted unless
        ``checks``, admission checks, are not all Ready)."""
        with self.server.changed:
            workload = self.workload(minicluster)
            sets = workload["spec"]["podSets"]
            workload.setdefault("status", {})["admission"] = {
                "clusterQueue": cluster_queue,
                "podSetAssignments": [
                    {"name": s["name"], "flavors": {"cpu": flavor}, "count": s["count"]}
                    for s in sets
                ],
            }
            ready = all(c.get("state") == "Ready" for c in checks or [])
            # a reservation again ends an eviction, its cause kept in the message
            for condition in workload.get("status", {}).get("conditions") or []:
                if condition["type"] in ("Evicted", "Preempted") and condition["status"] == "True":
                    condition.update(status="False", reason="QuotaReserved",
                                     message=f"Previously: {condition['message']}")  # fmt: skip
            if checks is not None:
                workload["status"]["admissionChecks"] = checks
            self._decide(
                workload,
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": f"Quota reserved in ClusterQueue {cluster_queue}"},
                {"type": "Admitted", "status": "True" if ready else "False",
                 "reason": "Admitted" if ready else "NoChecks",
                 "message": f"The workload is admitted by ClusterQueue {cluster_queue}"},
            )  # fmt: skip
            return workload

    def hold(self, minicluster: str, message: str) -> None:
        """It waits: the quota is short (Kueue's words in ``message``)."""
        with self.server.changed:
            self._decide(self.workload(minicluster), {"type": "QuotaReserved", "status": "False",
                                                      "reason": "Pending", "message": message})  # fmt: skip

    def evict(self, minicluster: str, reason: str = "Preempted",
              message: str = "Preempted to accommodate a workload (UID: x) due to prioritization "
                             "in the ClusterQueue") -> None:  # fmt: skip
        """Take the admission back: Evicted (Preempted also says so)."""
        with self.server.changed:
            changes = [{"type": "Evicted", "status": "True", "reason": reason, "message": message}]
            if reason == "Preempted":
                changes.append({"type": "Preempted", "status": "True", "reason": "InClusterQueue",
                                "message": message})  # fmt: skip
            self._decide(self.workload(minicluster), *changes)

    def _suspend(self, kind: str, name: str, root: dict[str, Any], value: bool) -> None:
        """Kueue's update of spec.suspend (its field from then on, for server-side apply)."""
        root["spec"]["suspend"] = value
        self.server._bump("MODIFIED", kind, self.namespace, root)
        self.server.record_update(kind, self.namespace, name, ("spec", "suspend"), MANAGER)


def _count(root: dict[str, Any]) -> int:
    """The pod set's count, as Kueue reads it from a Job: max(parallelism, completions)."""
    spec = root["spec"]
    return max(spec.get("parallelism", 1), spec.get("completions", 1))
