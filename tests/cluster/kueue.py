"""Kueue, as far as the fake API server needs it: for a queued Job or JobSet
it keeps a Workload (labelled with the job's uid, as Kueue labels it) whose
conditions a test sets, admits the workload by unsuspending it, and (as
Kueue's job reconciler does after a change) stops an admitted Job whose size
no longer matches what it admitted. Its writes of spec.suspend are updates
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
                "apiVersion": "kueue.x-k8s.io/v1beta1",
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

    def _suspend(self, kind: str, name: str, root: dict[str, Any], value: bool) -> None:
        """Kueue's update of spec.suspend (its field from then on, for server-side apply)."""
        root["spec"]["suspend"] = value
        self.server._bump("MODIFIED", kind, self.namespace, root)
        self.server.record_update(kind, self.namespace, name, ("spec", "suspend"), MANAGER)


def _count(root: dict[str, Any]) -> int:
    """The pod set's count, as Kueue reads it from a Job: max(parallelism, completions)."""
    spec = root["spec"]
    return max(spec.get("parallelism", 1), spec.get("completions", 1))
