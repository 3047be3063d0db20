"""The test cluster's real nodes (tests/realk8s/node), where every test's
pods run, and what places a pod on them: their label, which kwok's node
(node-m, tainted: only the scale benchmarks' pods go there) has not, and
the image with Flux installed."""

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

# the real nodes' label
REAL = "fluxhop.test/real"
# node-r0 has two GPUs (the tests' device plugin: go/kubernetes/gpu-plugin);
# a zone each, so that Kueue's topology-aware scheduling has a choice to make
REAL_NODES = [
    NodeSpec(
        name,
        labels={"topology.kubernetes.io/zone": f"zone-{name[-2:]}", REAL: "yes"},
        capacity=capacity,
    )
    for name, capacity in (("node-r0", {"nvidia.com/gpu": "2"}), ("node-r1", {}))
]
# What puts a pod there: in a pod spec, and as fluxhop's flags
ON_REAL_NODES: dict[str, Any] = {"nodeSelector": {REAL: "yes"}}
REAL_FLAGS = ["--node-selector", f"{REAL}=yes"]
# The real node the lost-node tests lose (its kubelet and pods killed, its
# Node deleted) and bring back: they alone put pods there then
LOST_NODE = "node-r1"
ON_LOST_NODE: dict[str, Any] = {"nodeSelector": {REAL: "yes", "kubernetes.io/hostname": LOST_NODE}}


def flux_image(cluster: LocalCluster) -> tuple[str, dict[str, Any]]:
    """An image with Flux installed (in /usr, as upstream's flux-sched
    image has it), and the pod settings that place it."""
    return FLUX_IMAGE, ON_REAL_NODES


def flux_image_flags(cluster: LocalCluster) -> list[str]:
    """``flux_image`` as fluxhop's flags."""
    return ["--flux-in-image", "--image", FLUX_IMAGE, *REAL_FLAGS]


def placed_minicluster(cluster: LocalCluster, doc: dict[str, Any]) -> dict[str, Any]:
    """A MiniCluster document on the real nodes whose containers of image
    ``host`` (a test's word for "an image with Flux") run the Flux image."""
    out = on_real_nodes(cluster, doc)
    for container in out["spec"].get("containers") or []:
        if container.get("image") == "host":
            container["image"] = FLUX_IMAGE
    return out


def on_real_nodes(cluster: LocalCluster, doc: dict[str, Any]) -> dict[str, Any]:
    """A MiniCluster document placed on the real nodes (spec.pod's node
    selector), its images as written."""
    out = copy.deepcopy(doc)
    pod = out["spec"].setdefault("pod", {})
    pod.setdefault("nodeSelector", {}).update(ON_REAL_NODES["nodeSelector"])
    return out
