"""The Flux Operator as a controller of the test cluster (issue #35).

Built by ``python -m tests.build peers`` from a copy of
``../shared/upstream/flux-operator`` as upstream ships it (tests/peers), and
run the way the cluster allows:

* **as upstream's Deployment** (config/manager/manager.yaml), where the
  cluster has real nodes and its image is built (images/peer_images.py):
  its binary on Debian with libczmq, as uid 65532, placed on the real
  nodes, in ``operator-system`` with upstream's kustomize prefix, reaching
  the API server through the `kubernetes` Service with its ServiceAccount's
  token; upstream's limits (500m CPU, 128Mi) as shipped;
* **as a process here**, as that Deployment would run it but outside the
  cluster, with a token of the same ServiceAccount: where the cluster has
  no real nodes, and for the scale benchmark, which reads both operators'
  CPU and memory by process.

Either way upstream's ClusterRole (config/rbac/role.yaml), bound to its
ServiceAccount and enforced by the API server, is all it may do; the
MiniCluster CRD is the conformance one (../shared/conformance/crds/), the
snapshot the operator was built from; leader election off (one replica:
upstream's leader-election Role is not in the copy here).

It watches MiniClusters in every namespace, and so does nothing else here
but fluxhop's operator, which the tests run against one namespace: the two
must never see the same MiniCluster. :meth:`FluxOperator.start` waits until
no MiniCluster exists in the cluster (the tests before it delete theirs
with their namespaces) and :meth:`FluxOperator.stop` deletes every
MiniCluster before it stops, then restores deploy/'s CRD (a superset:
fluxhop's status fields), which the rest of the session expects.
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
from tests.realk8s.images.build import images_dir
from tests.realk8s.images.peer_images import FLUX_OPERATOR_IMAGE, peer_images_current
from tests.realk8s.placing import ON_REAL_NODES
from tests.realk8s.processes import Process
from tests.realk8s.tools import kubectl, pod_log

__all__ = ["NAMESPACE", "USER", "FluxOperator", "missing_flux_operator"]

# upstream's kustomize (config/default) puts it in operator-system with the prefix operator-
NAMESPACE, ACCOUNT, ROLE = "operator-system", "operator-controller-manager", "operator-manager-role"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"  # as the API server names it
CRD = CONFORMANCE / "crds" / "flux-framework.org_miniclusters.yaml"
CRD_NAME = "miniclusters.flux-framework.org"
ALL_MINICLUSTERS = "/apis/flux-framework.org/v1alpha2/miniclusters"
DEPLOYMENT = "operator-controller-manager"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
SELECTOR = "control-plane=controller-manager"  # upstream's pod labels


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


def deployment() -> dict[str, Any]:
    """Upstream's Deployment (config/manager/manager.yaml) as its kustomize
    (config/default) names it, its image built here, placed on the real
    nodes; leader election off (one replica), logging at info as the
    process runs it."""
    documents = yaml.safe_load_all((FLUX_OPERATOR.source() / "config" / "manager" /
                                    "manager.yaml").read_text())  # fmt: skip
    (found,) = [d for d in documents if d["kind"] == "Deployment"]
    out = copy.deepcopy(found)
    out["metadata"].update(name=DEPLOYMENT, namespace=NAMESPACE)
    pod = out["spec"]["template"]["spec"]
    pod["serviceAccountName"] = ACCOUNT
    pod.update(copy.deepcopy(ON_REAL_NODES))
    (container,) = pod["containers"]
    container["image"] = FLUX_OPERATOR_IMAGE
    container["args"] = [a for a in container.get("args") or [] if a != "--leader-elect"]
    container["args"].append("--zap-log-level=info")
    return dict(out)


class FluxOperator:
    """The Flux Operator running beside a LocalCluster: upstream's Deployment
    on the real nodes, else (or with ``process``) a process here."""

    def __init__(self, cluster: LocalCluster, process: bool = False) -> None:
        self.cluster = cluster
        self.health = free_port()
        self.process: Process | None = None
        self.in_pod = (not process and bool(cluster.real_nodes)
                       and peer_images_current(images_dir()))  # fmt: skip
        self.pod: str | None = None  # the Deployment's pod, when one runs
        self.earlier = ""  # the logs of its pods replaced by a restart

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
        if self.in_pod:
            self._apply([deployment()])
            return self._ready()
        return self._run()

    # --- upstream's Deployment ----------------------------------------------------------

    def _ready(self, instead_of: str | None = None) -> FluxOperator:
        """Once the Deployment's pod (another than ``instead_of``) is Ready:
        its readiness probe, upstream's, answered through its kubelet."""

        def ready() -> str | None:
            with self.cluster.admin() as api:
                pods = api.get(PODS, labelSelector=SELECTOR)["items"]
            for pod in pods:
                conditions = (pod.get("status") or {}).get("conditions") or []
                if (
                    pod["metadata"]["name"] != instead_of
                    and not pod["metadata"].get("deletionTimestamp")
                    and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                ):
                    return str(pod["metadata"]["name"])
            return None

        try:
            self.pod = wait_until("the Flux Operator's pod Ready", ready, 180, [])
        except ClusterError as error:
            with self.cluster.admin() as api:
                pods = api.get(PODS, labelSelector=SELECTOR)["items"]
            raise ClusterError(f"{error}: {[p.get('status') for p in pods]}") from None
        return self

    def _pod_log(self) -> str:
        return pod_log(self.cluster, NAMESPACE, self.pod)

    # --- a process ----------------------------------------------------------------------

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

    # --- either -------------------------------------------------------------------------

    def restart(self) -> FluxOperator:
        """Stopped and started again, its MiniClusters left as they are: it
        lists them all and reconciles each (a resync). Its pod deleted, the
        Deployment makes another; or the process started again."""
        if self.in_pod:
            self.earlier += self._pod_log()
            gone = self.pod
            with self.cluster.admin() as api:
                api.delete(f"{PODS}/{gone}")
            return self._ready(instead_of=gone)
        if self.process is not None:
            self.process.stop()
        return self._run()

    def log(self, lines: int = 60) -> str:
        if self.in_pod:
            return "\n".join((self.earlier + self._pod_log()).splitlines()[-lines:])
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
            if self.in_pod:
                self.earlier += self._pod_log()
                api.delete(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{DEPLOYMENT}")
                wait_until("the Flux Operator's pods gone",
                           lambda: not api.get(PODS, labelSelector=SELECTOR)["items"], 120, [])  # fmt: skip
                self.pod = None
        if self.process is not None:
            self.process.stop()
            self.cluster.processes.pop("flux-operator", None)
        self._crd(REPO / "deploy" / "crd.yaml")
