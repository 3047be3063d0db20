"""The Flux Operator as a controller of the test cluster (issue #35).

Built by ``python -m tests.build peers`` from a copy of
``../shared/upstream/flux-operator`` as upstream ships it (tests/peers), and
started here as a process, as its Deployment (config/manager) would run it
but outside the cluster: it authenticates with a token of its own
ServiceAccount bound to upstream's ClusterRole (config/rbac/role.yaml), so
that role, enforced by the API server, is all it may do; the MiniCluster CRD
is the conformance one (../shared/conformance/crds/), the snapshot the
operator was built from; metrics are off, the health probe on a free port,
leader election off (one replica).

It watches MiniClusters in every namespace, and so does nothing else here
but fluxhop's operator, which the tests run against one namespace: the two
must never see the same MiniCluster. :meth:`FluxOperator.start` waits until
no MiniCluster exists in the cluster (the tests before it delete theirs
with their namespaces) and :meth:`FluxOperator.stop` deletes every
MiniCluster before it stops the process, then restores deploy/'s CRD (a
superset: fluxhop's status fields), which the rest of the session expects.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from tests.conformance import CONFORMANCE, REPO
from tests.peers import FLUX_OPERATOR
from tests.realk8s.api import ApiError
from tests.realk8s.cluster import ClusterError, LocalCluster, free_port, healthy, wait_until
from tests.realk8s.controllers import established
from tests.realk8s.processes import Process
from tests.realk8s.tools import kubectl

__all__ = ["NAMESPACE", "USER", "FluxOperator", "missing_flux_operator"]

# upstream's kustomize (config/default) puts it in operator-system with the prefix operator-
NAMESPACE, ACCOUNT, ROLE = "operator-system", "operator-controller-manager", "operator-manager-role"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"  # as the API server names it
CRD = CONFORMANCE / "crds" / "flux-framework.org_miniclusters.yaml"
CRD_NAME = "miniclusters.flux-framework.org"
ALL_MINICLUSTERS = "/apis/flux-framework.org/v1alpha2/miniclusters"


def missing_flux_operator() -> str | None:
    """Why the Flux Operator cannot run here, or None."""
    reason = FLUX_OPERATOR.missing()
    if reason:
        return reason
    for library in ("libczmq.so.4", "libzmq.so.5"):  # what its cgo key generator links
        if not any(Path(d, library).exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib")):
            return f"the Flux Operator links libczmq: install libczmq-dev (missing {library})"
    return None


def rbac() -> list[dict[str, Any]]:
    """Its namespace, ServiceAccount, upstream's ClusterRole and a binding."""
    role = yaml.safe_load((FLUX_OPERATOR.source() / "config" / "rbac" / "role.yaml").read_text())
    role = copy.deepcopy(role)
    role["metadata"] = {"name": ROLE}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": NAMESPACE},
        },
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": ROLE,
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        },
    ]


def miniclusters(cluster: LocalCluster) -> list[str]:
    """Every MiniCluster in the cluster (none while no CRD serves them) but
    those going with their namespace: nothing can be made for them any more
    (one whose operator stopped before removing its finalizer stays so)."""
    with cluster.admin() as api:
        try:
            found = api.get(ALL_MINICLUSTERS)["items"]
        except ApiError as error:
            if error.status == 404:
                return []
            raise
        terminating = {
            n["metadata"]["name"]
            for n in api.get("/api/v1/namespaces")["items"]
            if n.get("status", {}).get("phase") == "Terminating"
        }
    found = [m for m in found if m["metadata"]["namespace"] not in terminating]
    return [
        f"{m['metadata']['namespace']}/{m['metadata']['name']}"
        + (f" (deleted at {m['metadata']['deletionTimestamp']}, finalizers "
           f"{m['metadata'].get('finalizers')})" if m["metadata"].get("deletionTimestamp") else "")
        for m in found
    ]  # fmt: skip


class FluxOperator:
    """The Flux Operator running beside a LocalCluster."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.health = free_port()
        self.process: Process | None = None

    def _apply(self, *paths_or_objects: Path | list[dict[str, Any]]) -> None:
        for item in paths_or_objects:
            if isinstance(item, Path):
                kubectl(
                    self.cluster, "apply", "--server-side", "--force-conflicts", "-f", str(item)
                )
            else:
                kubectl(self.cluster, "apply", "--server-side", "--force-conflicts", "-f", "-",
                        stdin=yaml.safe_dump_all(item))  # fmt: skip

    def _crd(self, path: Path) -> None:
        self._apply(path)
        with self.cluster.admin() as api:
            crd = {"metadata": {"name": CRD_NAME}}
            wait_until("the MiniCluster CRD established", lambda: established(api, crd), 60, [])

    def start(self) -> FluxOperator:
        try:
            wait_until("no MiniCluster left by another operator's tests",
                       lambda: not miniclusters(self.cluster), 180, [])  # fmt: skip
        except ClusterError as error:
            raise ClusterError(f"{error}: {miniclusters(self.cluster)}") from None
        self._crd(CRD)
        self._apply(rbac())
        return self._run()

    def _run(self) -> FluxOperator:
        token = self.cluster.token(NAMESPACE, ACCOUNT, seconds=24 * 3600)
        kubeconfig = self.cluster.kubeconfig("flux-operator", token=token)
        binary = FLUX_OPERATOR.binary()
        assert binary is not None
        argv = [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.health}",
            "--zap-log-level=info",
        ]
        self.process = Process("flux-operator", argv, self.cluster.workdir, env={**os.environ})
        self.process.start()
        self.cluster.processes["flux-operator"] = self.process  # a stopped cluster stops it too
        wait_until("the Flux Operator ready",
                   lambda: healthy(f"http://127.0.0.1:{self.health}/readyz"), 120,
                   [self.process])  # fmt: skip
        return self

    def restart(self) -> FluxOperator:
        """The process stopped and started again, its MiniClusters left as
        they are: it lists them all and reconciles each (a resync)."""
        if self.process is not None:
            self.process.stop()
        return self._run()

    def log(self, lines: int = 60) -> str:
        return self.process.tail(lines) if self.process is not None else ""

    def stop(self) -> None:
        """Its MiniClusters go while it runs (it adds no finalizer; their
        objects follow by ownerReference), then it stops, then deploy/'s CRD
        is back."""
        with self.cluster.admin() as api:
            for key in miniclusters(self.cluster):
                namespace, name = key.split(" ")[0].split("/")
                api.delete(
                    f"/apis/flux-framework.org/v1alpha2/namespaces/{namespace}/miniclusters/{name}"
                )
        if self.process is not None:
            self.process.stop()
            self.cluster.processes.pop("flux-operator", None)
        self._crd(REPO / "deploy" / "crd.yaml")
