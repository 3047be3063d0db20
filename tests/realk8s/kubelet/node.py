"""The kubelet of one test-cluster node.

It registers its Node (labels ``kubernetes.io/hostname``, ``os``, ``arch``, a
topology zone and what the test adds; capacity in CPUs, memory, pods and,
when asked, ``nvidia.com/gpu``), keeps it Ready and renews its Lease in
``kube-node-lease``, serves /containerLogs and /exec through its HTTPS
server (the Go ``kubelet-server``, started as its child and ending with it),
and runs the pods the scheduler binds to it: it lists and watches them with
a ``spec.nodeName`` field selector, as the Node authorizer allows, re-lists
after a 410 Gone, and hands each to a ``PodWorker``. It authenticates as
``system:node:<name>`` in ``system:nodes``, so RBAC's Node authorizer and the
NodeRestriction admission plugin judge it as they judge a real kubelet.

Stopped with SIGTERM it leaves its pods running, as a real kubelet's
containers outlive it; the test fixture removes them.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realk8s.api import Api, ApiError, Credentials
from tests.realk8s.kubelet.network import NodeNetwork
from tests.realk8s.kubelet.pods import PodWorker
from tests.realk8s.kubelet.status import now
from tests.realk8s.processes import die_with_parent

__all__ = ["Kubelet", "NodeConfig"]

LEASE_SECONDS = 40  # as the kubelet's default; renewed every lease_renew seconds


@dataclass
class NodeConfig:
    name: str
    index: int  # which of the pod network's /24s is this node's
    server: str
    ca: Path
    cert: Path  # client certificate of system:node:<name>
    key: Path
    serving_cert: Path
    serving_key: Path
    server_binary: Path  # the Go kubelet-server
    port: int
    root: Path
    dns: str
    cluster_domain: str = "cluster.local"
    host_ip: str = "127.0.0.1"
    flux_prefix: Path | None = None
    capacity: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    # image -> {container path: host path}: image stand-ins (the host is every image)
    images: dict[str, dict[str, str]] = field(default_factory=dict)
    lease_renew: float = 2.0
    kubernetes_version: str = "v1.36.3"


class Kubelet:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node = config.name
        self.root = config.root
        self.dns = config.dns
        self.cluster_domain = config.cluster_domain
        self.host_ip = config.host_ip
        self.flux_prefix = config.flux_prefix
        credentials = Credentials(config.server, config.ca, config.cert, config.key)
        self.api = Api(credentials)
        self.watch_api = Api(credentials)
        self.network = NodeNetwork(config.index)
        self.capacity = {
            "cpu": "4",
            "memory": "8Gi",
            "pods": "110",
            "ephemeral-storage": "20Gi",
            **config.capacity,
        }
        self.allocatable = dict(self.capacity)
        self.workers: dict[str, PodWorker] = {}
        self.done: set[str] = (
            set()
        )  # pods whose worker has finished (their late events are ignored)
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    # --- the node ---------------------------------------------------------------
    def register(self) -> None:
        labels = {
            "kubernetes.io/hostname": self.node,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            **self.config.labels,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.node, "labels": labels},
            "spec": {"taints": self.config.taints},  # as kubelet --register-with-taints
        }
        try:
            self.api.create("/api/v1/nodes", body)
        except ApiError as error:
            if error.status != 409:
                raise
        self.post_status()

    def post_status(self) -> None:
        stamp = now()
        conditions = [
            {
                "type": kind,
                "status": "False",
                "reason": f"KubeletHas{reason}",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
            for kind, reason in (
                ("MemoryPressure", "SufficientMemory"),
                ("DiskPressure", "NoDiskPressure"),
                ("PIDPressure", "SufficientPID"),
            )
        ]
        conditions.append(
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        )
        status = {
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": self.host_ip},
                {"type": "Hostname", "address": self.node},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.config.port}},
            "nodeInfo": {
                "kubeletVersion": self.config.kubernetes_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "fluxhop-sim://1",
                "kernelVersion": "",
                "osImage": "the host filesystem",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
        self.api.patch(f"/api/v1/nodes/{self.node}/status", {"status": status})

    def renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.node}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        lease = self.api.find(path)
        if lease is None:
            node = self.api.get(f"/api/v1/nodes/{self.node}")
            self.api.create(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": self.node,
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Node",
                                "name": self.node,
                                "uid": node["metadata"]["uid"],
                            }
                        ],
                    },
                    "spec": {
                        "holderIdentity": self.node,
                        "leaseDurationSeconds": LEASE_SECONDS,
                        "renewTime": stamp,
                    },
                },
            )
            return
        lease["spec"].update(
            holderIdentity=self.node, leaseDurationSeconds=LEASE_SECONDS, renewTime=stamp
        )
        self.api.replace(path, lease)

    def heartbeat(self) -> None:
        beats = 0
        while not self.stopping.wait(self.config.lease_renew if beats else 0):
            try:
                self.renew_lease()
                if beats % 15 == 14:  # the Ready heartbeat, less often than the lease
                    self.post_status()
            except Exception as error:  # the API server may be restarting: keep beating
                print(f"kubelet {self.node}: heartbeat: {error}", file=sys.stderr, flush=True)
            beats += 1

    def serve(self) -> subprocess.Popen[bytes]:
        """The HTTPS endpoints, in the Go kubelet-server (dies with this process)."""
        c = self.config
        argv = [
            str(c.server_binary),
            f"--listen=127.0.0.1:{c.port}",
            f"--tls-cert-file={c.serving_cert}",
            f"--tls-private-key-file={c.serving_key}",
            f"--client-ca-file={c.ca}",
            f"--root={c.root / 'pods'}",
        ]
        log = open(c.root / "kubelet-server.log", "ab")  # noqa: SIM115 (the child holds it)
        return subprocess.Popen(argv, stdout=log, stderr=log, preexec_fn=die_with_parent)

    # --- pods -------------------------------------------------------------------------
    def forget(self, uid: str) -> None:
        with self.lock:
            self.workers.pop(uid, None)
            self.done.add(uid)

    def sync(self, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            worker = self.workers.get(uid)
            if worker is None and uid in self.done:
                return  # a late event of a pod this kubelet has finished with
        if kind == "DELETED":
            if worker is not None:
                worker.removed()
            return
        if worker is not None:
            worker.update(pod)
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):  # ran here before (or elsewhere): confirm a deletion
            if pod["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(ApiError):
                    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
                    self.api.delete(path, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
            return
        worker = PodWorker(self, pod)
        if pod["metadata"].get("deletionTimestamp"):
            worker.update(pod)  # before it starts: it sets nothing up for a deleted pod
        with self.lock:
            self.workers[uid] = worker
        worker.start()

    def watch_pods(self) -> None:
        selector = {"fieldSelector": f"spec.nodeName={self.node}"}
        path = "/api/v1/pods"
        while not self.stopping.is_set():
            try:
                listed = self.watch_api.get(path, **selector)
                seen = set()
                for pod in listed["items"]:
                    seen.add(pod["metadata"]["uid"])
                    self.sync("ADDED", pod)
                with self.lock:
                    vanished = [w for uid, w in self.workers.items() if uid not in seen]
                for worker in vanished:
                    worker.removed()
                version = listed["metadata"]["resourceVersion"]
                while not self.stopping.is_set():
                    for kind, obj in self.watch_api.watch(path, version, **selector):
                        if kind == "ERROR":
                            raise ApiError(obj.get("code", 410), obj.get("message", "watch error"))
                        version = obj["metadata"]["resourceVersion"]
                        if kind != "BOOKMARK":
                            self.sync(kind, obj)
            except Exception as error:  # 410 Gone, a restarting API server: list again
                if self.stopping.is_set():
                    return
                print(
                    f"kubelet {self.node}: watch: {error}; listing again",
                    file=sys.stderr,
                    flush=True,
                )
                self.stopping.wait(1)

    def run(self) -> None:
        (self.root / "pods").mkdir(parents=True, exist_ok=True)
        server = self.serve()
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        while True:  # the API server may still be starting
            try:
                self.register()
                break
            except Exception as error:
                if self.stopping.wait(0.5):
                    return
                print(f"kubelet {self.node}: register: {error}", file=sys.stderr, flush=True)
        threading.Thread(target=self.heartbeat, daemon=True).start()
        threading.Thread(target=self.watch_pods, daemon=True).start()
        print(f"kubelet {self.node}: ready", flush=True)
        self.stopping.wait()
        server.terminate()
