"""spec.leadState through ``fluxhop operator`` on the real cluster, with real
Flux and Fluxion: deploy/ applied (its ClusterRole), and the policy that
mounts the claim in rank 0's pod; the cluster has a default StorageClass (its
volume made by hand: a hostPath PersistentVolume waits for the claim). An
interactive MiniCluster resource that says nothing of its state gets a claim
of the default class; rank 0's pod deleted, the Job makes it again and the
instance comes back with its history."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.test_lead_state import (
    DEFAULT_CLASS,
    POLICY,
    SHARED,
    Lasting,
    lead_volume,
    policy_in_force,
    state_volume,
)
from tests.realk8s.test_operator import Operator, deployed, until  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, kubectl

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME = "operated"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def test_the_operator_keeps_rank_0s_state_on_the_default_class(
    cluster: LocalCluster,
    admin: Api,
    namespace: str,
    deployed: Path,  # noqa: F811
    tmp_path: Path,
):
    admin.create(CLASSES, {
        "metadata": {"name": DEFAULT_CLASS,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": SHARED})  # fmt: skip
    volume = state_volume(admin, namespace, NAME, tmp_path / "state", DEFAULT_CLASS)
    kubectl(cluster, "apply", "-f", str(POLICY))  # apart from deploy/: Kubernetes 1.36+
    eventually("the policy in force", lambda: policy_in_force(cluster, namespace), timeout=30)
    operator = Operator(cluster, deployed, namespace, tmp_path / "operator.log")
    operated = Lasting(cluster, admin, namespace, name=NAME)
    try:
        admin.create(MINICLUSTERS.format(namespace), placed_minicluster(cluster, {
            "apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": NAME},
            "spec": {"size": 2, "interactive": True, "flux": {"container": {"disable": True}},
                     "containers": [{"image": "host"}]}}))  # fmt: skip
        claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        claim = until("the claim made", operator, lambda: admin.find(f"{claims}/{NAME}-lead-state"))
        assert claim["spec"]["storageClassName"] == DEFAULT_CLASS
        until("both brokers online", operator, lambda: operated.online(NAME) == 2)
        lead, worker = operated.pod(0), operated.pod(1)
        assert lead is not None and worker is not None
        assert lead_volume(lead) is not None and lead_volume(worker) is None
        job = operated.flux("submit", "-N2", "true").strip()
        until("the job done", operator, lambda: operated.jobs()[job][0] == "INACTIVE")

        admin.delete(f"/api/v1/namespaces/{namespace}/pods/{lead['metadata']['name']}")
        until("a new rank 0 running", operator, lambda: operated.replaced(lead))
        until("both brokers online again", operator, lambda: operated.online(NAME) == 2)
        assert operated.jobs()[job][:2] == ["INACTIVE", "COMPLETED"]  # the history kept
        events = admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        assert "LeadState" not in {e["reason"] for e in events}  # no warning: a claim
        resource = admin.get(f"{MINICLUSTERS.format(namespace)}/{NAME}")
        conditions = {c["type"]: c["status"] for c in resource["status"]["conditions"]}
        assert conditions.get("Failed") != "True", resource["status"]
    finally:
        operator.stop()
        kubectl(cluster, "delete", "-f", str(POLICY))
        admin.delete(f"{CLASSES}/{DEFAULT_CLASS}")
        admin.delete(f"/api/v1/persistentvolumes/{volume}")
