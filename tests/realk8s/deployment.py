"""deploy/ on the test cluster, for an operator run as a process here.

``fluxhop operator`` runs on this machine, not in the Deployment, but with
the Deployment's identity: a token of deploy/'s ServiceAccount, so deploy/'s
ClusterRole, enforced by the API server, is all it may do. The tests
(test_operator) and the benchmarks (bench/) deploy it this one way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conformance import REPO
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.tools import kubectl

__all__ = ["ACCOUNT", "DEPLOY_NAMESPACE", "ROLE", "USER", "deploy", "deploy_objects"]

DEPLOY_NAMESPACE, ACCOUNT, ROLE = "fluxhop-system", "fluxhop-operator", "fluxhop-operator"
USER = f"system:serviceaccount:{DEPLOY_NAMESPACE}:{ACCOUNT}"  # as the API server names it


def deploy_objects(cluster: LocalCluster) -> list[dict[str, Any]]:
    """deploy/ as kustomize renders it, without the Deployment. One apply, as
    the README's, on a cluster that has not seen the CRDs yet."""
    text = kubectl(cluster, "kustomize", str(REPO / "deploy")).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc and doc["kind"] != "Deployment"]


def deploy(cluster: LocalCluster, seconds: int = 3600) -> Path:
    """deploy/ applied (its CRD established); a kubeconfig holding a token of
    its ServiceAccount, valid ``seconds``."""
    kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=yaml.safe_dump_all(deploy_objects(cluster)))  # fmt: skip
    kubectl(cluster, "wait", "--for=condition=Established", "crd/miniclusters.flux-framework.org")
    return cluster.kubeconfig("operator", token=cluster.token(DEPLOY_NAMESPACE, ACCOUNT, seconds))
