"""Where a test's pods run: the real nodes (tests/realk8s/node) when the
cluster has them, else the Python kubelet's nodes. A module moved onto the
real nodes asks for its image and placement here, so that it runs on
whichever the cluster has."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.nodes import NodeSpec

if TYPE_CHECKING:
    from tests.realk8s.cluster import LocalCluster

__all__ = [
    "LOST_NODE", "ON_LOST_NODE", "ON_REAL_NODES", "REAL", "REAL_FLAGS", "REAL_NODES", "flux_image",
    "flux_image_flags", "on_real_nodes", "placed_minicluster",
]  # fmt: skip

# Only pods that tolerate the real nodes' taint land there, while the rest
# of the tier still runs on the Python kubelet's nodes.
REAL = "fluxhop.test/real"
# node-r0 has two GPUs (the tests' device plugin: go/kubernetes/gpu-plugin);
# a zone each, so that Kueue's topology-aware scheduling has a choice to make
REAL_NODES = [
    NodeSpec(
        name,
        labels={"topology.kubernetes.io/zone": f"zone-{name[-2:]}", REAL: "yes"},
        capacity=capacity,
        taints=[{"key": REAL, "value": "yes", "effect": "NoSchedule"}],
        real=True,
    )
    for name, capacity in (("node-r0", {"nvidia.com/gpu": "2"}), ("node-r1", {}))
]
# What puts a pod there: in a pod spec, and as fluxhop's flags
ON_REAL_NODES: dict[str, Any] = {
    "nodeSelector": {REAL: "yes"},
    "tolerations": [{"key": REAL, "operator": "Exists", "effect": "NoSchedule"}],
}
REAL_FLAGS = ["--node-selector", f"{REAL}=yes", "--toleration", f"{REAL}:NoSchedule"]
# The real node the lost-node tests lose (its kubelet and pods killed, its
# Node deleted) and bring back: they alone put pods there then
LOST_NODE = "node-r1"
ON_LOST_NODE: dict[str, Any] = {
    "nodeSelector": {REAL: "yes", "kubernetes.io/hostname": LOST_NODE},
    "tolerations": ON_REAL_NODES["tolerations"],
}


def flux_image(cluster: LocalCluster) -> tuple[str, dict[str, Any]]:
    """An image with Flux installed, and the pod settings that place it: the
    image built with the project's Flux on the real nodes, or the host
    standing in for it on the Python kubelet's."""
    if cluster.real_nodes:
        return FLUX_IMAGE, ON_REAL_NODES
    return "host", {}


def flux_image_flags(cluster: LocalCluster) -> list[str]:
    """``flux_image`` as fluxhop's flags."""
    image, placed = flux_image(cluster)
    return ["--flux-in-image", "--image", image, *(REAL_FLAGS if placed else [])]


def placed_minicluster(cluster: LocalCluster, doc: dict[str, Any]) -> dict[str, Any]:
    """A MiniCluster document whose containers of image ``host`` (Flux from
    the host, on the Python kubelet's nodes) run the Flux image on the real
    nodes when the cluster has them: the image, and spec.pod's placement."""
    image, placed = flux_image(cluster)
    if not placed:
        return doc
    out = on_real_nodes(cluster, doc)
    for container in out["spec"].get("containers") or []:
        if container.get("image") == "host":
            container["image"] = image
    return out


def on_real_nodes(cluster: LocalCluster, doc: dict[str, Any]) -> dict[str, Any]:
    """A MiniCluster document placed on the real nodes when the cluster has
    them (spec.pod's node selector and tolerations), its images as written."""
    if not cluster.real_nodes:
        return doc
    out = copy.deepcopy(doc)
    pod = out["spec"].setdefault("pod", {})
    pod.setdefault("nodeSelector", {}).update(ON_REAL_NODES["nodeSelector"])
    pod["tolerations"] = [*pod.get("tolerations", []), *ON_REAL_NODES["tolerations"]]
    return out
