"""The Kubernetes objects around the pods: labels, ConfigMap, Secret, the
headless Service and the NetworkPolicy that guards the broker port."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from fluxhop.arguments import checked
from fluxhop.errors import InputError
from fluxhop.render.bundle import BROKER_PORT, Bundle
from fluxhop.spec.kueue import KUEUE_PREFIX
from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "MANAGED_BY",
    "MINICLUSTER_LABEL",
    "common_labels",
    "config_map",
    "config_map_name",
    "curve_secret",
    "curve_secret_name",
    "headless_service",
    "lead_state_claim",
    "lead_state_claim_name",
    "metadata",
    "network_policy",
    "owner_reference",
    "workload_labels",
]

MANAGED_BY = "app.kubernetes.io/managed-by"
MINICLUSTER_LABEL = "fluxhop.io/minicluster"


def common_labels(spec: MiniCluster) -> dict[str, str]:
    """Labels on every object fluxhop renders (user labels first, ours win).

    Kueue's labels (the queue name, a workload priority class) are left to the
    workload itself (workload_labels): on a pod, Kueue's pod integration would
    take each broker for a workload of its own."""
    users = {k: v for k, v in spec.metadata.labels.items() if not k.startswith(KUEUE_PREFIX)}
    return {**users, MANAGED_BY: "fluxhop", MINICLUSTER_LABEL: spec.name}


def workload_labels(spec: MiniCluster) -> dict[str, str]:
    """Labels of the Job or JobSet: spec.jobLabels, and Kueue's from the
    MiniCluster's own labels (``kueue.x-k8s.io/queue-name``...)."""
    kueue = {k: v for k, v in spec.metadata.labels.items() if k.startswith(KUEUE_PREFIX)}
    return {**kueue, **spec.spec.job_labels}


def selector(spec: MiniCluster) -> dict[str, str]:
    return {MINICLUSTER_LABEL: spec.name}


def metadata(
    spec: MiniCluster, name: str, extra_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": spec.namespace,
        "labels": {**(extra_labels or {}), **common_labels(spec)},
    }
    if spec.metadata.annotations:
        meta["annotations"] = dict(spec.metadata.annotations)
    return meta


def config_map_name(spec: MiniCluster) -> str:
    return f"{spec.name}-flux-config"


def curve_secret_name(spec: MiniCluster) -> str:
    return f"{spec.name}-flux-curve"


def config_map(spec: MiniCluster, bundle: Bundle, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(spec, name or config_map_name(spec)),
        "data": dict(bundle.config_files),
    }


def curve_secret(spec: MiniCluster, bundle: Bundle) -> dict[str, Any]:
    encoded = base64.b64encode(bundle.cert.to_zpl().encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(spec, curve_secret_name(spec)),
        "type": "Opaque",
        "data": {"curve.cert": encoded},
    }


def lead_state_claim_name(spec: MiniCluster) -> str | None:
    """The PersistentVolumeClaim rank 0 keeps its state on (spec.leadState),
    None when there is none (no leadState, or an emptyDir)."""
    state = spec.spec.lead_state
    return state.claim_of(spec.name) if state is not None else None


def lead_state_claim(spec: MiniCluster) -> dict[str, Any] | None:
    """The claim fluxhop makes for spec.leadState, when it names none.

    ReadWriteOnce: only rank 0's pod mounts it (render/pod.py), on one node
    at a time; the Job makes a new rank 0 only once the old one has ended.
    """
    state = spec.spec.lead_state
    claim = lead_state_claim_name(spec)
    if state is None or claim is None or not state.made_by_fluxhop:
        return None
    body: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": state.size}},
    }
    if state.storage_class_name:
        body["storageClassName"] = state.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(spec, claim),
        "spec": body,
    }


def headless_service(spec: MiniCluster) -> dict[str, Any]:
    """DNS for the brokers: ``<host>.<headless>.<ns>.svc.<domain>``.

    ``publishNotReadyAddresses`` makes the records exist before readiness, so
    brokers resolve each other while they bootstrap.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(spec, spec.headless_name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(spec),
            "ports": [
                {
                    "name": "flux-broker",
                    "port": BROKER_PORT,
                    "targetPort": BROKER_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def _other_ports(closed: list[int]) -> list[dict[str, Any]]:
    """Every TCP port but ``closed`` (sorted), and all of UDP and SCTP."""
    ranges, start = [], 1
    for port in closed:
        if start < port:
            ranges.append({"protocol": "TCP", "port": start, "endPort": port - 1})
        start = port + 1
    if start <= 65535:
        ranges.append({"protocol": "TCP", "port": start, "endPort": 65535})
    return [*ranges, {"protocol": "UDP"}, {"protocol": "SCTP"}]


def network_policy(spec: MiniCluster) -> dict[str, Any]:
    """Open the broker port to this MiniCluster's pods only, and the metrics
    port (where rank 0 serves one) to the pods of its own namespace and of
    the namespaces ``spec.metrics.namespaces`` names.

    A policy that selects pods denies every ingress it does not allow, so the
    last rule keeps all other ports (MPI, services users run) open as before;
    only the ports fluxhop serves are restricted.
    """
    closed = [BROKER_PORT]
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {"matchLabels": selector(spec)}}]}]
    if spec.spec.serves_metrics:
        port = spec.spec.metrics.port
        closed = sorted({BROKER_PORT, port})
        names = sorted({spec.namespace, *spec.spec.metrics.namespaces})
        scrapers = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": names}]}  # fmt: skip
        ingress.append({
            "from": [{"namespaceSelector": scrapers}],
            "ports": [{"protocol": "TCP", "port": port}],
        })  # fmt: skip
    ingress.append({"ports": _other_ports(closed)})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(spec, f"{spec.name}-flux-broker"),
        "spec": {
            "podSelector": {"matchLabels": selector(spec)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


@checked(where="owner_reference")
def owner_reference(obj: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """The ownerReference that makes an object garbage when ``obj`` is deleted.

    ``controller`` marks ``obj`` as the one that manages it (a MiniCluster's
    root for its children, a TrainJob for its JobSet); an owner that merely
    outlives it (a DWS Workflow) is not its controller.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    missing = [key for key in ("apiVersion", "kind") if not isinstance(obj.get(key), str)]
    missing += [f"metadata.{k}" for k in ("name", "uid") if not isinstance(meta.get(k), str)]
    if missing:
        raise InputError(
            f"owner_reference: obj has no {', '.join(missing)} (string); an owner is an object "
            "read back from the API server, which sets metadata.uid"
        )
    reference: dict[str, Any] = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    if controller:
        reference.update(controller=True, blockOwnerDeletion=True)
    return reference
