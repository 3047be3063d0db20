"""How the Flux view reaches the pods, decided against the cluster:
``flux.container.volume: auto`` becomes ``image`` (the view image mounted
read-only, nothing copied) where every node the pods may land on can mount
an image volume, and ``copy`` elsewhere, with one warning that says why.

An image volume (KEP-4639) needs the kubelet at 1.35 or later (beta and on
by default; GA and locked on in 1.36) and a runtime that mounts one with
its subPath: containerd 2.2 or later, or CRI-O 1.33 or later (containerd
2.1 and CRI-O 1.31-1.32 mount image volumes but ignore subPath, mounting
the whole image where the view should be). A node says both in
``status.nodeInfo``. No API tells whether the feature gate was turned off
by hand; ``flux.container.volume: copy`` is the way out there.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Literal

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopWarning, Forbidden
from fluxhop.render.pod import VIEW_IMAGE_VOLUME
from fluxhop.render.targets import Target
from fluxhop.spec.kueue import queue_of
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.pod import Toleration

__all__ = ["node_problem", "resolved_view_volume", "tolerated", "view_undecided"]

KUBELET_FROM = (1, 35)
RUNTIMES_FROM = {"containerd": (2, 2), "cri-o": (1, 33)}
BLOCKING = ("NoSchedule", "NoExecute")


def _version(text: str) -> tuple[int, ...]:
    """``v1.36.3`` or ``2.4.2-1`` -> (1, 36, 3); () when there is none."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(part) for part in found.groups() if part is not None) if found else ()


def node_problem(node: dict[str, Any]) -> str | None:
    """Why pods on ``node`` cannot mount an image volume, or None."""
    name = node["metadata"]["name"]
    info = (node.get("status") or {}).get("nodeInfo") or {}
    kubelet = str(info.get("kubeletVersion", ""))
    if _version(kubelet)[:2] < KUBELET_FROM:
        return f"node {name}'s kubelet is {kubelet or 'of no known version'}, before 1.35"
    runtime, _, version = str(info.get("containerRuntimeVersion", "")).partition("://")
    least = RUNTIMES_FROM.get(runtime)
    if least is None or _version(version)[:2] < least:
        return (f"node {name} runs {runtime or 'an unknown runtime'} {version}".rstrip()
                + ", which mounts no image volume's subPath (containerd 2.2 or CRI-O 1.33 does)")  # fmt: skip
    return None


def tolerated(taint: dict[str, Any], tolerations: Iterable[Toleration]) -> bool:
    """Kubernetes' rule: a toleration matches a taint by effect (none: any),
    key (none with Exists: any) and value (Equal) or any value (Exists)."""
    for toleration in tolerations:
        if toleration.effect and toleration.effect != taint.get("effect"):
            continue
        if toleration.operator == "Exists":
            if not toleration.key or toleration.key == taint.get("key"):
                return True
        elif toleration.key == taint.get("key") and (toleration.value or "") == (
            taint.get("value") or ""
        ):
            return True
    return False


def _may_run(node: dict[str, Any], spec: MiniCluster) -> bool:
    """Whether the scheduler may put the MiniCluster's pods on ``node``. A
    queued one may land on any schedulable node: Kueue's flavor adds node
    selectors and tolerations only at admission."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    if queue_of(spec):
        return True
    labels = node["metadata"].get("labels") or {}
    pod = spec.spec.pod
    if any(labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    taints = (node.get("spec") or {}).get("taints") or []
    return all(tolerated(t, pod.tolerations) for t in taints if t.get("effect") in BLOCKING)


def _why_copied(
    kube: Kube, spec: MiniCluster, nodes: Callable[[], list[dict[str, Any]]] | None
) -> str | None:
    try:
        listed = nodes() if nodes is not None else kube.list("Node")
    except Forbidden:
        return "nodes may not be listed here, so whether they mount image volumes is not known"
    for node in listed:
        if _may_run(node, spec):
            problem = node_problem(node)
            if problem:
                return problem
    return None


def _mounts_image(obj: Any) -> bool:
    """Whether an existing root's pods (a Job's or a JobSet's templates,
    however deep) mount the view image."""
    if isinstance(obj, dict):
        volumes = obj.get("volumes")
        if isinstance(volumes, list) and any(
            isinstance(v, dict) and v.get("name") == VIEW_IMAGE_VOLUME and "image" in v
            for v in volumes
        ):
            return True
        return any(_mounts_image(value) for value in obj.values())
    if isinstance(obj, list):
        return any(_mounts_image(value) for value in obj)
    return False


def view_undecided(spec: MiniCluster, target: Target) -> bool:
    """Whether ``spec`` leaves to the cluster how the view reaches its pods."""
    view = spec.spec.flux.container
    return not view.disable and view.volume == "auto" and target is not Target.MINICLUSTER


def resolved_view_volume(
    kube: Kube,
    spec: MiniCluster,
    target: Target,
    *,
    existing: dict[str, Any] | None,
    nodes: Callable[[], list[dict[str, Any]]] | None = None,
) -> MiniCluster:
    """``spec`` with ``flux.container.volume: auto`` decided: as the existing
    root has it (a create again changes nothing), else by the nodes the pods
    may land on (``nodes``: where a caller keeps them, e.g. the operator's
    short-lived list; else one LIST). The Flux Operator's resource keeps
    "auto": it copies."""
    if not view_undecided(spec, target):
        return spec
    choice: Literal["image", "copy"]
    if existing is not None:
        choice = "image" if _mounts_image(existing) else "copy"
    else:
        why = (
            f"it is dispatched to other clusters (spec.managedBy {spec.spec.managed_by}), "
            "whose nodes are not known here"
            if spec.spec.managed_by
            else _why_copied(kube, spec, nodes)
        )
        choice = "copy" if why else "image"
        if why:
            warnings.warn(
                f"spec.flux.container.volume auto: the Flux view is copied into each pod, not "
                f"mounted from its image: {why} (set it to image or copy to choose)",
                FluxhopWarning,
                stacklevel=3,
            )
    decided = spec.model_copy(deep=True)
    decided.spec.flux.container.volume = choice
    return decided
