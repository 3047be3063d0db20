"""A real Kubernetes cluster on this machine, for the ``realk8s`` tests.

``LocalCluster`` starts, in order: etcd (embedded from etcd's server module)
→ kube-apiserver (RBAC and the Node authorizer enforced, NodeRestriction
admitted) → kube-controller-manager (the Job, garbage-collector,
EndpointSlice, ServiceAccount, namespace, root-CA, node-lifecycle,
taint-eviction and pod-GC controllers among others, each with its own
service account) → kube-scheduler → CoreDNS (its ``kubernetes`` plugin on the
bridge's address) → the registry of the images built here → the nodes
(nodes.py): real ones (a kubelet, containerd and runc, kube-proxy:
tests/realk8s/node) and kwok's (kwok.py). The binaries are the ones
``python -m tests.realk8s.build`` built from Go modules; the control plane
listens on the bridge's address (the real nodes reach it there) and on
127.0.0.1.

Differences from a production cluster, on purpose and small: short
node-failure timings so that a lost node is noticed in seconds
(tests/realk8s/components.py), and every node on this one machine.

``stop`` leaves no process, network namespace, mount or directory behind;
``start`` first removes whatever a killed run left, and holds a lock so that
only one test cluster runs on a machine at a time (they share the bridge).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import ssl
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx

from tests.realk8s.access import Access
from tests.realk8s.binaries import missing_binaries
from tests.realk8s.bridge import (
    GATEWAY,
    GUEST_DNS,
    GUEST_NODE_INDEX,
    create_bridge,
    delete_everything,
    guest_address,
)
from tests.realk8s.cleanup import RUN_DIR, leftovers, sweep
from tests.realk8s.components import (
    CLUSTER_DOMAIN,
    KUBERNETES_SERVICE_IP,
    apiserver_flags,
    audit_flags,
    controller_manager_flags,
    coredns_rbac,
    corefile,
    etcd_flags,
    scheduler_flags,
)
from tests.realk8s.images.build import built_images, missing_images
from tests.realk8s.images.registry import Registry
from tests.realk8s.node.host import (
    CGROUP_PARENT,
    cgroup_hierarchies,
    record_host,
    remove_cgroup,
    restore_host,
)
from tests.realk8s.node.node import RealNode, missing_runtime, sweep_nodes
from tests.realk8s.nodes import REPO, Nodes, NodeSpec
from tests.realk8s.pki import CA, KeyPair
from tests.realk8s.ports import free_port
from tests.realk8s.processes import Process

__all__ = [
    "REPO",
    "ClusterError",
    "LocalCluster",
    "NodeSpec",
    "free_port",
    "missing_cluster",
]

LOCK = Path("/run/fluxhop-realk8s.lock")
HOST_RECORD = "host.json"  # what the real nodes' kubelets change on the machine


class ClusterError(Exception):
    pass


def missing_cluster() -> str | None:
    """Why a test cluster cannot start here, or None."""
    reason = missing_binaries()
    if reason:
        return reason
    if os.geteuid() != 0:
        return "the test cluster's nodes need root (network namespaces, mounts, cgroups)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"the test cluster's nodes need {tool} (iproute2 / util-linux)"
    return missing_images() or missing_runtime()


def wait_until(what: str, check: Any, timeout: float, processes: list[Process]) -> Any:
    """Poll ``check`` until it returns something true; fail early if a process died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except Exception:
            found = None
        if found:
            return found
        for p in processes:
            if not p.alive():
                raise ClusterError(f"{p.name} exited while waiting for {what}:\n{p.tail()}")
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def healthy(url: str, pair: KeyPair | None = None, ca: Path | None = None) -> bool:
    """A 200 from a health endpoint (TLS verified against ``ca`` where given)."""
    context = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    if pair is not None:
        context.load_cert_chain(str(pair.cert), str(pair.key))
    with httpx.Client(verify=context, timeout=5) as client:
        return client.get(url).status_code == 200


class LocalCluster(Nodes, Access):
    def __init__(
        self,
        bin_dir: Path,
        nodes: list[NodeSpec],
        flux_prefix: Path | None = None,
        *,
        audited: tuple[str, ...] = (),
        api_qps: int | None = None,
        name: str = "cluster",
    ) -> None:
        """``name`` other than "cluster": beside the test cluster and apart
        from it (its own directory and lock). Without ``nodes``, a control
        plane only (etcd, the API server, the controller manager: no
        scheduler, pod network or DNS), e.g. a Kueue MultiKueue manager's.
        With ``nodes``, a *guest* of the running test cluster: a whole
        cluster whose pods hang off the test cluster's bridge (its nodes'
        indexes from GUEST_NODE_INDEX, its DNS on GUEST_DNS), e.g. a second
        MultiKueue worker; one guest at a time."""
        self.bin = bin_dir
        self.audited = audited  # groups whose requests the API server logs (audit_log)
        # the controller manager's and the scheduler's client rate (None: Kubernetes' defaults)
        self.api_qps = api_qps
        self.node_specs = nodes
        self.flux_prefix = flux_prefix
        self.processes: dict[str, Process] = {}
        self.name = name
        self.full = name == "cluster"  # the test cluster: nodes, pods, the machine's pod network
        self.guest = not self.full and bool(nodes)  # pods on the test cluster's network
        # its nodes' network indexes: a guest's after the test cluster's
        # (their pods' ranges stay below the Service range)
        self.first_node = GUEST_NODE_INDEX if self.guest else 0
        self.dns = GUEST_DNS if self.guest else GATEWAY
        self.workdir = RUN_DIR / name
        self.lock_file: Any = None
        # mount points made on the host that stop could not remove
        self.created_left: list[str] = []
        self.real_nodes: dict[str, RealNode] = {}
        self.registry_url = ""
        self.started = 0.0

    # --- files ------------------------------------------------------------------------
    @property
    def audit_log(self) -> Path:
        """The requests of the ``audited`` groups' users (tests/realk8s/audit.py)."""
        return self.workdir / "audit" / "audit.log"

    # --- the components -------------------------------------------------------------
    def _k8s(self, component: str, *flags: str) -> Process:
        process = Process(component, [str(self.bin / "k8s"), component, *flags], self.workdir)
        self.processes[component] = process.start()
        return process

    def _etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._k8s("etcd", *etcd_flags(self.workdir / "etcd", self.etcd_url, peer_url))

    def start_apiserver(self) -> None:
        flags = apiserver_flags(
            self.etcd_url,
            self.api_port,
            self.workdir / "pki",
            self.ca.cert,
            self.serving,
            self.api_address,
        ) + audit_flags(self.workdir / "audit", self.audited)
        self._k8s("kube-apiserver", *flags)
        wait_until(
            "the API server's /readyz",
            lambda: healthy(f"{self.server}/readyz", self.admin_pair, self.ca.cert),
            120,
            [self.processes["kube-apiserver"], self.processes["etcd"]],
        )

    def restart_apiserver(self, *, crash: bool = False) -> None:
        """Stop the API server (SIGTERM, or SIGKILL with ``crash``: no graceful
        end for the streams it serves) and start it again: a fault for tests."""
        if crash:
            self.processes["kube-apiserver"].kill()
        else:
            self.processes["kube-apiserver"].stop()
        self.start_apiserver()

    def _controller_manager(self) -> None:
        port = free_port()
        pair = self.ca.issue("kube-controller-manager", "system:kube-controller-manager")
        config = self.kubeconfig("kube-controller-manager", pair=pair)
        sa_key = self.workdir / "pki" / "sa.key"
        self._k8s(
            "kube-controller-manager",
            *controller_manager_flags(config, self.ca.cert, sa_key, port, self.api_qps),
        )
        self.health["kube-controller-manager"] = f"https://127.0.0.1:{port}/healthz"

    def _scheduler(self) -> None:
        port = free_port()
        pair = self.ca.issue("kube-scheduler", "system:kube-scheduler")
        self._k8s(
            "kube-scheduler",
            *scheduler_flags(self.kubeconfig("kube-scheduler", pair=pair), port, self.api_qps),
        )
        self.health["kube-scheduler"] = f"https://127.0.0.1:{port}/healthz"

    def _coredns(self) -> None:
        pair = self.ca.issue("coredns", "system:coredns")
        with self.admin() as api:
            for path, obj in coredns_rbac("system:coredns"):
                api.create(path, obj)
        ready = free_port()
        config = self.workdir / "Corefile"
        config.write_text(corefile(self.kubeconfig("coredns", pair=pair), ready, self.dns))
        process = Process(
            "coredns", [str(self.bin / "coredns"), "-conf", str(config)], self.workdir
        )
        self.processes["coredns"] = process.start()
        self.health["coredns"] = f"http://127.0.0.1:{ready}/ready"

    def _registry(self) -> None:
        """The registry the real nodes pull from, serving the images built
        here (tests/realk8s/images), on the bridge's address."""
        storage = built_images()
        if storage is None:
            raise ClusterError(missing_images() or "no images")
        record_host(self.workdir / HOST_RECORD)
        address = f"{GATEWAY}:{free_port()}"
        registry = Registry(self.bin / "registry", storage, address, self.workdir / "registry")
        self.processes["registry"] = registry.start().process
        self.registry_url = registry.url

    # --- the whole cluster -------------------------------------------------------------
    def start(self) -> LocalCluster:
        self.started = time.monotonic()
        RUN_DIR.mkdir(exist_ok=True)
        lock = LOCK if self.full else LOCK.with_name(f"{LOCK.stem}-{self.name}.lock")
        self.lock_file = open(lock, "w")  # noqa: SIM115 (held for the cluster's life)
        try:
            fcntl.flock(self.lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock_file.close()
            self.lock_file = None
            raise ClusterError(f"another test {self.name} is running on this machine") from None
        self.sweep()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.workdir.mkdir(parents=True)
        self.workdir.chmod(0o755)
        if self.full:
            create_bridge()
        elif self.guest:
            guest_address(True)
        self.ca = CA(self.workdir / "pki")
        self.api_port = free_port()
        # on the bridge where real nodes reach it (the test cluster's, a guest's)
        self.api_address = (
            GATEWAY if self.full or any(n.real for n in self.node_specs) else "127.0.0.1"
        )
        self.server = f"https://{self.api_address}:{self.api_port}"
        self.serving = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            hosts=(
                "127.0.0.1",
                "localhost",
                GATEWAY,
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
            ),
        )
        self.ca.issue(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", groups=("system:masters",)
        )
        self.ca.signing_key("sa")
        self.admin_pair = self.ca.issue("admin", "fluxhop-admin", groups=("system:masters",))
        self.admin_kubeconfig = self.kubeconfig("admin", pair=self.admin_pair)
        self.health: dict[str, str] = {}
        self._etcd()
        self.start_apiserver()
        self._controller_manager()
        if self.full or self.guest:
            self._scheduler()
            self._coredns()
        if any(spec.real for spec in self.node_specs):
            self._registry()
        for index, spec in enumerate(self.node_specs):
            self._kubelet(index, spec)
        everything = list(self.processes.values()) + [
            process for node in self.real_nodes.values() for process in node.alive()
        ]
        for name, url in self.health.items():
            wait_until(f"{name} healthy", lambda url=url: healthy(url), 120, everything)
        with self.admin() as api:
            wait_until(
                "every node Ready",
                lambda: self.ready_nodes(api) == {n.name for n in self.node_specs},
                120,
                everything,
            )
            wait_until(
                "the default ServiceAccount",
                lambda: api.find("/api/v1/namespaces/default/serviceaccounts/default"),
                60,
                everything,
            )

    def stop(self) -> None:
        self.created_left = []
        control_plane = (
            "coredns",
            "kube-scheduler",
            "kube-controller-manager",
            "kube-apiserver",
            "etcd",
        )
        for node in self.real_nodes.values():
            self.created_left += node.stop()
        if self.real_nodes and self.full:  # a guest's nodes removed their own
            self.created_left += remove_cgroup(CGROUP_PARENT)
        self.real_nodes.clear()
        # the kubelets, and the controllers started beside the cluster (tests/realk8s/controllers.py)
        for name in [n for n in self.processes if n not in control_plane]:
            self.processes[name].stop()
        if self.full:
            delete_everything()  # the nodes' namespaces and the bridge
        elif self.guest:
            guest_address(False)
        restore_host(self.workdir / HOST_RECORD, self.workdir)
        for name in control_plane:
            if name in self.processes:
                self.processes[name].stop()
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.lock_file is not None:
            self.lock_file.close()
            self.lock_file = None

    def leftovers(self) -> list[str]:
        """What of a test cluster is still on this machine (empty after ``stop``)."""
        made = [f"mount point or cgroup {p}" for p in self.created_left if os.path.lexists(p)]
        made += [
            f"cgroup {h / CGROUP_PARENT}"
            for h in cgroup_hierarchies()
            if (h / CGROUP_PARENT).exists()
        ]
        if not self.full:  # its processes only: the test cluster's share the binaries
            return leftovers(self.workdir, None)
        return leftovers(self.workdir, self.bin) + made

    def sweep(self) -> list[str]:
        """Remove what a killed run left (its processes, namespaces, files)."""
        left = sweep_nodes(self.workdir, self.workdir / HOST_RECORD) if self.full else []
        left += sweep(self.workdir, pod_network=self.full)
        if self.guest:
            guest_address(False)
        return left
