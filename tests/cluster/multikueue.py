"""Kueue's MultiKueue on a manager cluster, as far as the fake API server
needs it: for a dispatched MiniCluster resource it keeps the Workload
(labelled with the resource's uid, as fluxhop operator labels the one it
makes) and writes its decisions there - held, dispatched to a worker
cluster, given back, finished - and copies the worker's status onto the
resource. The real thing is tested in tests/realk8s/test_multikueue.py."""

from __future__ import annotations

import uuid
from typing import Any

from tests.cluster.fakeapi import FakeAPIServer, now

__all__ = ["MultiKueue", "multikueue_queue"]

CHECK = "multikueue"


def multikueue_queue(server: FakeAPIServer, queue: str, *, dispatching: bool = True) -> None:
    """LocalQueue ``queue`` on a ClusterQueue of its own, with MultiKueue's
    admission check when ``dispatching``."""
    checks = [CHECK] if dispatching else []
    server.seed("AdmissionCheck", {"metadata": {"name": CHECK},
                                   "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}},
                namespace="")  # fmt: skip
    server.seed("ClusterQueue", {"metadata": {"name": f"cq-{queue}"},
                                 "spec": {"admissionChecks": checks}}, namespace="")  # fmt: skip
    server.seed(
        "LocalQueue", {"metadata": {"name": queue}, "spec": {"clusterQueue": f"cq-{queue}"}}
    )


class MultiKueue:
    def __init__(self, server: FakeAPIServer, namespace: str = "default") -> None:
        self.server = server
        self.namespace = namespace

    def _resource(self, name: str) -> dict[str, Any]:
        found = self.server.store.get(("MiniCluster", self.namespace, name))
        if found is None:
            raise AssertionError(f"no MiniCluster {name}")
        return found

    def _workload(self, name: str) -> dict[str, Any]:
        uid = self._resource(name)["metadata"]["uid"]
        for (kind, _, _), obj in self.server.store.items():
            if kind == "Workload" and obj["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid:
                return obj
        workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": f"minicluster-{name}-{uuid.uuid4().hex[:5]}",
                "namespace": self.namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "labels": {"kueue.x-k8s.io/job-uid": uid},
            },
            "spec": {"queueName": "lq"},
            "status": {"conditions": []},
        }
        self.server._put("Workload", self.namespace, workload, "ADDED")
        return workload

    def _decide(self, name: str, conditions: list[dict[str, str]], **status: Any) -> None:
        with self.server.changed:
            workload = self._workload(name)
            kinds = {c["type"] for c in conditions}
            kept = [c for c in workload["status"]["conditions"] if c["type"] not in kinds]
            workload["status"]["conditions"] = kept + conditions
            for key, value in status.items():
                if value is None:
                    workload["status"].pop(key, None)
                else:
                    workload["status"][key] = value
            self.server._bump("MODIFIED", "Workload", self.namespace, workload)

    def hold(self, name: str, message: str) -> None:
        """No worker has room: quota not reserved, with Kueue's reason."""
        self._decide(name, [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                             "message": message}])  # fmt: skip

    def dispatch(self, name: str, cluster: str) -> None:
        """Worker ``cluster`` admitted its copy: the check is Ready, the Workload admitted."""
        checks = [{"name": CHECK, "state": "Ready",
                   "message": f'The workload got reservation on "{cluster}"'}]  # fmt: skip
        self._decide(name, [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                             "message": "Quota reserved"},
                            {"type": "Admitted", "status": "True", "reason": "Admitted",
                             "message": "admitted"},
                            {"type": "Evicted", "status": "False", "reason": "Admitted",
                             "message": ""}],
                     clusterName=cluster, admissionChecks=checks)  # fmt: skip

    def give_back(self, name: str, message: str) -> None:
        """Evicted on the worker: the manager's Workload is evicted and queued again."""
        self._decide(name, [{"type": "Evicted", "status": "True", "reason": "AdmissionCheck",
                             "message": message},
                            {"type": "Admitted", "status": "False", "reason": "NoReservation",
                             "message": "The workload has no reservation"},
                            {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                             "message": message}],
                     clusterName=None)  # fmt: skip

    def finish(self, name: str, *, reason: str = "Succeeded",
               message: str = "finished on the worker") -> None:  # fmt: skip
        self._decide(name, [{"type": "Finished", "status": "True", "reason": reason,
                             "message": message}])  # fmt: skip

    def reject(self, name: str, message: str) -> None:
        """MultiKueue's check rejects it (Kueue then deactivates the Workload)."""
        checks = [{"name": CHECK, "state": "Rejected", "message": message}]
        self._decide(name, [], admissionChecks=checks)

    def report(self, name: str, status: dict[str, Any]) -> None:
        """The worker's status of its copy, copied onto the manager's resource."""
        with self.server.changed:
            resource = self._resource(name)
            resource["status"] = status
            self.server._bump("MODIFIED", "MiniCluster", self.namespace, resource)


def worker_status(*, up: int, size: int = 2, code: int | None = None,
                  output: str = "") -> dict[str, Any]:  # fmt: skip
    """The status fluxhop operator writes on the worker's copy."""
    over = code is not None
    conditions = [
        {"type": "Ready", "status": str(up >= size and not over)},
        {"type": "Succeeded", "status": str(code == 0)},
        {"type": "Failed", "status": str(over and code != 0),
         "message": f"rank 0 exited with code {code}" if over and code else ""},
    ]  # fmt: skip
    status: dict[str, Any] = {"conditions": conditions, "size": size, "brokersUp": up}
    if over:
        status["exitCode"] = code
    if output:
        status["output"] = output
    return status
