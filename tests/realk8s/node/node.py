"""One real node: containerd, the kubelet and kube-proxy of the control
plane's release, in a network namespace of its own on the test cluster's
bridge (tests/realk8s/bridge.py).

The node's namespace ``fhk8s-node<i>`` has ``eth0`` on the bridge with the
node's address (``config.NodeAddresses``) and a default route through the
host, which serves the API server and the cluster DNS on the bridge's
address. Its programs share a mount namespace of the node's own too
(pinned at ``<root>/mnt``), as the programs of one machine do: the
kubelet's volume mounts reach containerd's containers, no node's mounts
reach the host or another node, and ``/var/lib/kubelet`` is the node's own
there (the kubelet keeps its device plugins' sockets in
``/var/lib/kubelet/device-plugins`` whatever its root, and empties that
directory as it starts: two kubelets sharing it would unplug each other's
plugins). A node whose spec asks for ``nvidia.com/gpu`` runs the tests'
device plugin (``go/kubernetes/gpu-plugin``) there. Its pods hang off a CNI bridge
inside the node's namespace, in the node's own range; the host and every
other node route that range to the node's address, so pods reach each
other across nodes as on any flat pod network. kube-proxy programs the
node's own iptables, so ClusterIPs route from its pods.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tests.realk8s.binaries import bin_dir, built
from tests.realk8s.bridge import BRIDGE, GATEWAY, PREFIX_LENGTH
from tests.realk8s.components import CLUSTER_DOMAIN
from tests.realk8s.node.config import (
    MIRRORED_HOSTS,
    NodeAddresses,
    cni_conflist,
    containerd_config,
    hosts_toml,
    kube_proxy_config,
    kubelet_config,
)
from tests.realk8s.node.host import (
    CGROUP_PARENT,
    kill_cgroup,
    make_cgroup,
    remove_cgroup,
    restore_host,
    unmount_under,
)
from tests.realk8s.processes import Process

if TYPE_CHECKING:
    from tests.realk8s.nodes import Nodes, NodeSpec

__all__ = ["NODE_NETNS_PREFIX", "RealNode", "missing_runtime", "sweep_nodes"]

NODE_NETNS_PREFIX = "fhk8s-node"
GPU = "nvidia.com/gpu"
VETH_PREFIX = "fhkn"


def missing_runtime() -> str | None:
    """Why real nodes cannot run here, or None: their programs are built
    (tests/realk8s/binaries.py), iptables and nsenter are installed."""
    directory = bin_dir()
    if directory is None or not built(directory):
        return "the real nodes' programs are not built (python -m tests.realk8s.build)"
    for tool in ("iptables", "nsenter", "conntrack"):
        if shutil.which(tool) is None:
            return f"the real nodes need {tool} (python -m tests.build installs it)"
    return None


def _ip(*args: str, netns: str | None = None, check: bool = True) -> None:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


class RealNode:
    """A real node of ``cluster`` (a LocalCluster): ``index`` is its place
    among the cluster's nodes, which names its addresses and namespace."""

    def __init__(self, cluster: Nodes, index: int, spec: NodeSpec) -> None:
        self.cluster = cluster
        self.spec = spec
        self.index = index
        self.addresses = NodeAddresses(index)
        self.netns = f"{NODE_NETNS_PREFIX}{index}"
        self.root = cluster.workdir / "nodes" / spec.name
        self.cgroup = f"{CGROUP_PARENT}/{spec.name}"
        self.mnt = self.root / "mnt"
        self.processes: dict[str, Process] = {}

    # --- the network ---------------------------------------------------------------
    def _network(self, peers: list[RealNode]) -> None:
        veth = f"{VETH_PREFIX}{self.index}"
        _ip("netns", "add", self.netns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
        _ip("link", "set", veth, "master", BRIDGE, "up")
        ip = self.addresses.node_ip
        _ip("addr", "add", f"{ip}/{PREFIX_LENGTH}", "dev", "eth0", netns=self.netns)
        _ip("link", "set", "eth0", "up", netns=self.netns)
        _ip("link", "set", "lo", "up", netns=self.netns)
        _ip("route", "add", "default", "via", GATEWAY, netns=self.netns)
        subprocess.run(
            ["ip", "netns", "exec", self.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
            check=True,
        )
        _ip("route", "replace", self.addresses.pod_cidr, "via", ip)  # the host's
        for peer in peers:
            _ip("route", "replace", peer.addresses.pod_cidr, "via", peer.addresses.node_ip,
                netns=self.netns)  # fmt: skip
            _ip("route", "replace", self.addresses.pod_cidr, "via", ip, netns=peer.netns)

    # --- the mount namespace -----------------------------------------------------------
    def _mount_namespace(self) -> None:
        """The node's mount namespace, pinned by a bind mount at ``self.mnt``
        (which may not sit on a shared mount: the node's directory is made
        a private mount of its own first), with ``/var/lib/kubelet`` the
        node's ``var-lib-kubelet`` in it."""
        own = self.root / "var-lib-kubelet"
        own.mkdir(parents=True, exist_ok=True)
        Path("/var/lib/kubelet").mkdir(parents=True, exist_ok=True)  # host.py puts it back
        self.mnt.touch()
        for argv in (
            ["mount", "--bind", str(self.root), str(self.root)],
            ["mount", "--make-private", str(self.root)],
            ["unshare", f"--mount={self.mnt}", "--propagation", "private",
             "mount", "--bind", str(own), "/var/lib/kubelet"],
        ):  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def _in_netns(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        """``argv`` in the node's network and mount namespaces."""
        process = Process(
            f"{name}-{self.spec.name}",
            ["nsenter", f"--net=/run/netns/{self.netns}", f"--mount={self.mnt}", "--", *argv],
            self.cluster.workdir,
            env=env,
        )
        self.processes[name] = process.start()
        return process

    # --- containerd ------------------------------------------------------------------
    def _containerd(self, registry: str, pause_image: str) -> None:
        bin_dir = self.cluster.bin
        runtime = self.root / "containerd"
        for host in (*MIRRORED_HOSTS, None):
            hosts = runtime / "certs.d" / (host or "_default") / "hosts.toml"
            hosts.parent.mkdir(parents=True, exist_ok=True)
            hosts.write_text(hosts_toml(registry, host))
        net_d = runtime / "cni" / "net.d"
        net_d.mkdir(parents=True, exist_ok=True)
        conflist = cni_conflist(self.addresses, runtime / "cni" / "ipam")
        (net_d / "10-fhk8s.conflist").write_text(json.dumps(conflist, indent=1))
        config = runtime / "config.toml"
        config.write_text(containerd_config(runtime, bin_dir, pause_image))
        env = {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"}  # its shim, by name
        process = self._in_netns(
            "containerd", [str(bin_dir / "containerd"), "--config", str(config)], env
        )
        socket = runtime / "containerd.sock"
        deadline = time.monotonic() + 60
        while not socket.exists():
            if not process.alive() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"containerd of {self.spec.name} did not start:\n{process.tail()}"
                )
            time.sleep(0.05)
        self.socket = socket

    # --- the kubelet and kube-proxy --------------------------------------------------------
    def _kubelet(self) -> None:
        ca = self.cluster.ca
        name = self.spec.name
        pair = ca.issue(f"kubelet-{name}", f"system:node:{name}", groups=("system:nodes",))
        serving = ca.issue(f"kubelet-{name}-serving", name, hosts=(self.addresses.node_ip, name))
        kubelet = self.root / "kubelet"
        kubelet.mkdir(parents=True, exist_ok=True)
        resolv = self.root / "resolv.conf"
        resolv.write_text(f"nameserver {self.cluster.dns}\n")
        make_cgroup(self.cgroup)
        config = self.root / "kubelet.yaml"
        config.write_text(
            kubelet_config(
                address=self.addresses.node_ip,
                ca=ca.cert,
                serving=(serving.cert, serving.key),
                runtime_socket=self.socket,
                cgroup_root=f"/{self.cgroup}",
                dns=self.cluster.dns,
                cluster_domain=CLUSTER_DOMAIN,
                resolv_conf=resolv,
                logs=self.root / "pod-logs",
                taints=self.spec.taints,
            )
        )
        labels = {"topology.kubernetes.io/zone": "zone-a", **self.spec.labels}
        self._in_netns(
            "kubelet",
            [
                str(self.cluster.bin / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={self.cluster.kubeconfig(f'kubelet-{name}', pair=pair)}",
                f"--root-dir={kubelet}",
                f"--node-ip={self.addresses.node_ip}",
                f"--hostname-override={name}",
                f"--node-labels={','.join(f'{k}={v}' for k, v in sorted(labels.items()))}",
                "--v=1",
            ],
        )

    def _kube_proxy(self) -> None:
        pair = self.cluster.ca.issue(f"kube-proxy-{self.spec.name}", "system:kube-proxy")
        kubeconfig = self.cluster.kubeconfig(f"kube-proxy-{self.spec.name}", pair=pair)
        config = self.root / "kube-proxy.yaml"
        config.write_text(
            kube_proxy_config(kubeconfig=kubeconfig, node=self.spec.name, health_port=10256)
        )
        self._in_netns("kube-proxy", [str(self.cluster.bin / "kube-proxy"), f"--config={config}"])

    def _devices(self) -> None:
        """The tests' device plugin, when the spec asks for GPUs: it
        registers with the kubelet (again after the kubelet restarts)."""
        count = self.spec.capacity.get(GPU)
        if count:
            plugin = str(self.cluster.bin / "gpu-plugin")
            argv = [plugin, f"--resource={GPU}", f"--count={count}", f"--node={self.spec.name}"]
            self._in_netns("gpu-plugin", argv)

    # --- the whole node --------------------------------------------------------------------
    def start(self, peers: list[RealNode], registry: str, pause_image: str) -> RealNode:
        self.root.mkdir(parents=True, exist_ok=True)
        self._network(peers)
        self._mount_namespace()
        self._containerd(registry, pause_image)
        self._kubelet()
        self._kube_proxy()
        self._devices()
        return self

    def stop_kubelet(self) -> None:
        """The kubelet alone, killed (a fault): its pods run on, unseen."""
        self.processes["kubelet"].kill()

    def start_kubelet(self) -> None:
        self.processes.pop("kubelet").kill()
        self._kubelet()

    def kill_pods(self) -> None:
        """Every process of the node's pods killed (the node died under them);
        containerd sees its tasks end, the kubelet cleans up when it is back."""
        kill_cgroup(self.cgroup)

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.cluster.bin / "ctr"), "--address", str(self.socket),
             "--namespace", "k8s.io", *args],
            capture_output=True, text=True, check=True,
        )  # fmt: skip

    def images(self) -> set[str]:
        """The image references the node's containerd holds (its CRI's)."""
        return set(self._ctr("images", "ls", "--quiet").stdout.split())

    def forget_images(self, references: list[str]) -> list[str]:
        """Remove images from the node's containerd (a cold cache: the next
        pod that names one pulls and unpacks it again); returns those it had."""
        had = sorted(self.images() & set(references))
        if had:
            self._ctr("images", "rm", "--sync", *had)
        return had

    def alive(self) -> list[Process]:
        return list(self.processes.values())

    def stop(self) -> list[str]:
        """Everything of the node gone: its programs, its pods' processes
        (whatever their state), their mounts and cgroups, its namespace and
        routes; returns the cgroups that could not be removed."""
        for name in ("gpu-plugin", "kube-proxy", "kubelet"):
            if name in self.processes:
                self.processes[name].stop(grace=5)
        kill_cgroup(self.cgroup)  # the pods' processes
        if "containerd" in self.processes:
            self.processes["containerd"].stop(grace=5)
        self._kill_netns()
        unmount_under(self.root)
        left = remove_cgroup(self.cgroup)
        _ip("route", "del", self.addresses.pod_cidr, check=False)
        _ip("netns", "del", self.netns, check=False)
        return left

    def _kill_netns(self) -> None:
        """The shims (started by containerd in the node's namespace)."""
        done = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True)
        for pid in done.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def sweep_nodes(workdir: Path, record: Path) -> list[str]:
    """What real nodes of a killed run left: their pods' processes and
    cgroups, their programs, their mounts under ``workdir``, the machine's
    settings their kubelets changed (``record``); returns what was found."""
    found = [f"pod process {pid}" for pid in kill_cgroup(CGROUP_PARENT)]
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(NODE_NETNS_PREFIX):
            pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
            for pid in pids.stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
                found.append(f"node process {pid}")
    found += [f"mount {point}" for point in unmount_under(workdir)]
    found += [f"cgroup {group}" for group in remove_cgroup(CGROUP_PARENT)]
    found += restore_host(record, workdir.parent)
    return found
