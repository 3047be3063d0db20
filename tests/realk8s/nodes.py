"""The nodes of a LocalCluster (cluster.py), started, stopped and started
again as faults need: real nodes (``NodeSpec``: containerd, runc,
the kubelet and kube-proxy, tests/realk8s/node) pulling the images built
here from the cluster's registry, and kwok's (``NodeSpec(kwok=True)``,
kwok.py), whose pods read as running while nothing runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.realk8s import kwok
from tests.realk8s.api import Api, Credentials
from tests.realk8s.images.build import PAUSE_IMAGE
from tests.realk8s.node.node import RealNode
from tests.realk8s.pki import CA
from tests.realk8s.processes import Process

__all__ = ["REPO", "NodeSpec", "Nodes"]

REPO = Path(__file__).resolve().parents[2]


@dataclass
class NodeSpec:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    # kwok's: its pods read as running, nothing runs (kwok.py); else a real
    # kubelet with containerd and runc (tests/realk8s/node)
    kwok: bool = False

    @property
    def real(self) -> bool:
        return not self.kwok


class Nodes:
    """The nodes of a LocalCluster, which it is a base of."""

    ca: CA  # made as the cluster starts
    bin: Path
    dns: str
    first_node: int  # the network index of its first node
    flux_prefix: Path | None
    node_specs: list[NodeSpec]
    processes: dict[str, Process]
    real_nodes: dict[str, RealNode]
    registry_url: str
    server: str
    workdir: Path
    # Access's (cluster.py's LocalCluster has both bases)
    credentials: Callable[..., Credentials]
    kubeconfig: Callable[..., Path]

    def _kubelet(self, index: int, spec: NodeSpec) -> None:
        if spec.kwok:
            self._kwok(index, spec)
            return
        peers = list(self.real_nodes.values())
        node = RealNode(self, self.first_node + index, spec)
        self.real_nodes[spec.name] = node
        node.start(peers, self.registry_url, PAUSE_IMAGE)

    def _kwok(self, index: int, spec: NodeSpec) -> None:
        # cluster-wide rights, as kwokctl gives it: it lists every node to
        # find its own, which the Node authorizer refuses a node
        pair = self.ca.issue(f"kwok-{spec.name}", f"kwok-{spec.name}", groups=("system:masters",))
        address = f"198.19.254.{self.first_node + index + 1}"  # a real node's would be
        node = kwok.node_object(spec.name, address, spec.labels, spec.taints, spec.capacity)
        with Api(self.credentials()) as api:
            process = kwok.start(
                api,
                self.kubeconfig(f"kwok-{spec.name}", pair=pair),
                self.bin,
                self.workdir,
                node,
            )
        self.processes[process.name] = process

    def stop_kubelet(self, node: str) -> None:
        """Kill a node's kubelet (a fault): its pods run on, unseen; its
        logs and exec go with it."""
        self.real_nodes[node].stop_kubelet()

    def start_kubelet(self, node: str) -> None:
        """Start a node's kubelet again (after stop_kubelet): it registers
        its Node anew if that was deleted."""
        self.real_nodes[node].start_kubelet()

    def forget_images(self, references: list[str]) -> dict[str, list[str]]:
        """Remove images from every real node's containerd (cold caches for
        a benchmark); node -> the images it had."""
        return {name: node.forget_images(references) for name, node in self.real_nodes.items()}

    def remove_pods_of(self, node: str) -> None:
        """End what a stopped kubelet's pods left running (the processes of
        its pods' cgroups)."""
        self.real_nodes[node].kill_pods()

    @staticmethod
    def ready_nodes(api: Api) -> set[str]:
        nodes = api.get("/api/v1/nodes")["items"]
        return {
            n["metadata"]["name"]
            for n in nodes
            for c in n.get("status", {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        }
