"""The nodes of a LocalCluster (cluster.py), started, stopped and started
again as faults need: real nodes (``NodeSpec(real=True)``: containerd, runc,
the kubelet and kube-proxy, tests/realk8s/node) pulling the images built
here from the cluster's registry, and nodes of the Python kubelet
(tests/realk8s/kubelet) with the image stand-ins they give pods (a view of
the Flux the pods run)."""

from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.realk8s import kwok
from tests.realk8s.api import Api
from tests.realk8s.binaries import KUBERNETES_VERSION
from tests.realk8s.components import CLUSTER_DOMAIN
from tests.realk8s.images.build import FLUX_VIEW_IMAGES, PAUSE_IMAGE
from tests.realk8s.kubelet.network import NETNS_PREFIX, delete_everything, guest_address
from tests.realk8s.node.node import RealNode
from tests.realk8s.pki import CA
from tests.realk8s.ports import free_port
from tests.realk8s.processes import Process

__all__ = ["FLUX_VIEW_IMAGES", "REPO", "NodeSpec", "Nodes"]

REPO = Path(__file__).resolve().parents[2]


@dataclass
class NodeSpec:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    kwok: bool = False  # its pods read as running, nothing runs (kwok.py)
    real: bool = False  # a real kubelet with containerd and runc (tests/realk8s/node)


class Nodes:
    """The kubelets of a LocalCluster, which it is a base of."""

    ca: CA  # made as the cluster starts
    bin: Path
    dns: str
    first_node: int  # the pod network index of its first node
    flux_prefix: Path | None
    node_specs: list[NodeSpec]
    processes: dict[str, Process]
    real_nodes: dict[str, RealNode]
    registry_url: str
    server: str
    workdir: Path

    def images(self) -> dict[str, dict[str, str]]:
        """Image stand-ins: a Flux view image (the Trainer plugin's and the
        Flux Operator's view init containers copy its /opt/views/._view/*
        and /opt/software into the pod) is a view of the flux-core the pods
        get, where there is one; /opt/view is that view too, as the image's
        link makes it (the Trainer plugin's init script makes /opt/view/bin:
        without it, that landed on this machine's /opt). /opt/software is
        this machine's, in every image: as root, Flux is built there
        (tests/realflux), where the view's links point."""
        if self.flux_prefix is None:
            return {}
        view = str(self._flux_view())
        software = "/opt/software"
        every = {software: software} if self.flux_prefix.is_relative_to(software) else {}
        stand_in = {"/opt/views/._view/fluxhop": view, "/opt/view": view, **every}
        return {"*": every, **{image: stand_in for image in FLUX_VIEW_IMAGES}}

    def _flux_view(self) -> Path:
        """A view of the Flux prefix as a Spack view is made: the prefix's
        directories, each file a symlink to the installed one (a copy of the
        view, as the view init containers make, still runs the prefix's own
        build, whose paths are compiled in), plus the libpython a view
        carries (the Flux Operator's wait.sh lists it; strict mode stops
        where it is missing)."""
        assert self.flux_prefix is not None
        view = self.workdir / "images" / "flux-view"
        if view.is_dir():
            return view
        for source in sorted(self.flux_prefix.rglob("*")):
            target = view / source.relative_to(self.flux_prefix)
            if source.is_dir() and not source.is_symlink():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(source)
        for python in self.flux_prefix.glob("lib/python3*"):  # the Python Flux was built for
            soname = f"lib{python.name}.so.1.0"
            found = sorted(glob.glob(f"/usr/lib/*/{soname}") + glob.glob(f"/usr/lib/{soname}"))
            if found and not (view / "lib" / soname).exists():
                (view / "lib" / soname).symlink_to(found[0])
        return view

    def _kubelet(self, index: int, spec: NodeSpec) -> None:
        if spec.kwok:
            self._kwok(index, spec)
            return
        if spec.real:
            peers = list(self.real_nodes.values())
            node = RealNode(self, self.first_node + index, spec)
            self.real_nodes[spec.name] = node
            node.start(peers, self.registry_url, PAUSE_IMAGE)
            return
        pair = self.ca.issue(
            f"kubelet-{spec.name}", f"system:node:{spec.name}", groups=("system:nodes",)
        )
        serving = self.ca.issue(
            f"kubelet-{spec.name}-serving", spec.name, hosts=("127.0.0.1", spec.name)
        )
        root = self.workdir / "nodes" / spec.name
        root.mkdir(parents=True, exist_ok=True)
        config = {
            "name": spec.name,
            "index": self.first_node + index,
            "server": self.server,
            "ca": str(self.ca.cert),
            "cert": str(pair.cert),
            "key": str(pair.key),
            "serving_cert": str(serving.cert),
            "serving_key": str(serving.key),
            "server_binary": str(self.bin / "kubelet-server"),
            "port": free_port(),
            "root": str(root),
            "dns": self.dns,
            "cluster_domain": CLUSTER_DOMAIN,
            "flux_prefix": str(self.flux_prefix) if self.flux_prefix else None,
            "capacity": spec.capacity,
            "taints": spec.taints,
            "images": self.images(),
            "labels": {"topology.kubernetes.io/zone": "zone-a", **spec.labels},
            "kubernetes_version": KUBERNETES_VERSION,
        }
        path = root / "config.json"
        path.write_text(json.dumps(config))
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        process = Process(
            f"kubelet-{spec.name}",
            [sys.executable, "-m", "tests.realk8s.kubelet", str(path)],
            self.workdir,
            env=env,
        )
        self.processes[process.name] = process.start()

    def _kwok(self, index: int, spec: NodeSpec) -> None:
        # cluster-wide rights, as kwokctl gives it: it lists every node to
        # find its own, which the Node authorizer refuses a node
        pair = self.ca.issue(f"kwok-{spec.name}", f"kwok-{spec.name}", groups=("system:masters",))
        address = f"198.19.254.{self.first_node + index + 1}"  # a real node's would be
        node = kwok.node_object(spec.name, address, spec.labels, spec.taints, spec.capacity)
        with Api(self.credentials()) as api:
            process = kwok.start(
                api, self.kubeconfig(f"kwok-{spec.name}", pair=pair), self.bin, self.workdir, node
            )
        self.processes[process.name] = process

    def stop_kubelet(self, node: str) -> None:
        """Kill a node's kubelet (a fault): its pods run on, unseen; its
        HTTPS server (logs, exec) goes with it."""
        if node in self.real_nodes:
            self.real_nodes[node].stop_kubelet()
            return
        self.processes[f"kubelet-{node}"].kill()

    def start_kubelet(self, node: str) -> None:
        """Start a node's kubelet again (after stop_kubelet): it registers
        its Node anew if that was deleted."""
        if node in self.real_nodes:
            self.real_nodes[node].start_kubelet()
            return
        index = next(i for i, spec in enumerate(self.node_specs) if spec.name == node)
        old = self.processes.get(f"kubelet-{node}")
        if old is not None:
            old.kill()
        self._kubelet(index, self.node_specs[index])

    def remove_pods_of(self, node: str) -> None:
        """End what a stopped kubelet's pods left running (their namespaces;
        on a real node, the processes of its pods' cgroups)."""
        if node in self.real_nodes:
            self.real_nodes[node].kill_pods()
            return
        index = next(i for i, spec in enumerate(self.node_specs) if spec.name == node)
        delete_everything(f"{NETNS_PREFIX}{self.first_node + index}-")

    @staticmethod
    def ready_nodes(api: Api) -> set[str]:
        nodes = api.get("/api/v1/nodes")["items"]
        return {
            n["metadata"]["name"]
            for n in nodes
            for c in n.get("status", {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        }

    def _delete_guest_pods(self) -> list[str]:
        """A guest's pods (its nodes' namespaces) and its DNS address, gone."""
        found = []
        for index in range(len(self.node_specs)):
            found += delete_everything(f"{NETNS_PREFIX}{self.first_node + index}-")
        guest_address(False)
        return found
