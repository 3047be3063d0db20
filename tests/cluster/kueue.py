"""Kueue, as far as the fake API server needs it: for a queued Job or JobSet
it keeps a Workload (labelled with the job's uid, as Kueue labels it) whose
conditions a test sets, and admits the workload by unsuspending it."""

from __future__ import annotations

import uuid
from typing import Any

from tests.cluster.fakeapi import FakeAPIServer, now

__all__ = ["Kueue"]


class Kueue:
    def __init__(self, server: FakeAPIServer, namespace: str = "default") -> None:
        self.server = server
        self.namespace = namespace

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
            root["spec"]["suspend"] = False
            self.server._bump("MODIFIED", kind, self.namespace, root)
