"""Where a MiniCluster's pods land: affinity, topology, spread, node selector
and tolerations, from the spec (see spec/placement.py for the flags).

* By default, soft rules as the Flux Operator sets them: the pods prefer one
  zone and one pod per node (``network.disableAffinity`` drops them).
* ``pod.podsPerNode: 1`` makes one pod per node a requirement; a larger N
  spreads the pods over nodes so that no node has more than N more of them
  than another (Kubernetes has no hard cap per node above one).
* A topology level (Kueue's podset topology annotation on the pods) is left
  to Kueue when the MiniCluster goes through a queue - Kueue's topology-aware
  scheduling reads that annotation - and becomes pod affinity on that node
  label otherwise, required or preferred as the annotation says.
"""

from __future__ import annotations

from typing import Any

from fluxhop.render.objects import MINICLUSTER_LABEL
from fluxhop.spec.kueue import queue_of, topology_of
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["HOSTNAME", "affinity", "spread"]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _term(spec: MiniCluster, topology_key: str) -> dict[str, Any]:
    return {
        "labelSelector": {"matchLabels": {MINICLUSTER_LABEL: spec.name}},
        "topologyKey": topology_key,
    }


def _rule(spec: MiniCluster, topology_key: str, *, required: bool) -> dict[str, Any]:
    if required:
        return {"requiredDuringSchedulingIgnoredDuringExecution": [_term(spec, topology_key)]}
    return {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": _term(spec, topology_key)}
        ]
    }


def _node_affinity(spec: MiniCluster) -> dict[str, Any] | None:
    wanted = spec.spec.pod.node_affinity
    if not wanted:
        return None
    expressions = [
        {"key": key, "operator": "In", "values": list(values)} for key, values in wanted.items()
    ]
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]
        }
    }


def affinity(spec: MiniCluster) -> dict[str, Any] | None:
    soft = not spec.spec.network.disable_affinity
    per_node = spec.spec.pod.pods_per_node
    topology = topology_of(spec)
    out: dict[str, Any] = {}
    if topology is not None:
        if queue_of(spec) is None:  # with a queue, Kueue places the pods by topology
            level, required = topology
            out["podAffinity"] = _rule(spec, level, required=required)
    elif soft:
        out["podAffinity"] = _rule(spec, ZONE, required=False)
    if per_node == 1:
        out["podAntiAffinity"] = _rule(spec, HOSTNAME, required=True)
    elif per_node is None and soft:
        out["podAntiAffinity"] = _rule(spec, HOSTNAME, required=False)
    node = _node_affinity(spec)
    if node:
        out["nodeAffinity"] = node
    return out or None


def spread(spec: MiniCluster) -> list[dict[str, Any]] | None:
    per_node = spec.spec.pod.pods_per_node
    if per_node is None or per_node == 1:
        return None
    return [
        {
            "maxSkew": per_node,
            "topologyKey": HOSTNAME,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {MINICLUSTER_LABEL: spec.name}},
        }
    ]
