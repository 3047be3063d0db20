"""``kubectl apply -k deploy/`` for real: fluxhop's operator runs as deploy/'s
Deployment, in pods on the real nodes, from the image built from the
project's Dockerfile (tests/realk8s/images/operator_image.py) and pulled
from the cluster's registry, under the pod security deploy/ asks for
(uid 65532, read-only root filesystem, no capabilities, seccomp), with its
ServiceAccount's token, reaching the API server through the `kubernetes`
Service's ClusterIP (kube-proxy), its liveness and readiness probes the
kubelet's. It reconciles a MiniCluster to Succeeded with its exit code.

The only change to deploy/ is a kustomize overlay placing the pods on the
real nodes (a node selector and a toleration), as a site places its own.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance import REPO
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.deployment import DEPLOY_NAMESPACE
from tests.realk8s.images.build import images_dir
from tests.realk8s.images.operator_image import OPERATOR_IMAGE, operator_image_current
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.placing import ON_REAL_NODES, REAL_NODES
from tests.realk8s.test_operator import condition, example
from tests.realk8s.tools import eventually, kubectl

pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]

DEPLOYMENT = f"/apis/apps/v1/namespaces/{DEPLOY_NAMESPACE}/deployments/fluxhop-operator"
PODS = f"/api/v1/namespaces/{DEPLOY_NAMESPACE}/pods"
SELECTOR = "app.kubernetes.io/name=fluxhop-operator"


def overlay(directory: Path) -> Path:
    """A kustomization of deploy/ that places its pods on the real nodes."""
    placement = {"spec": {"template": {"spec": ON_REAL_NODES}}}
    patch = {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "fluxhop-operator"}, **placement}  # fmt: skip
    (directory / "placement.yaml").write_text(yaml.safe_dump(patch))
    (directory / "kustomization.yaml").write_text(textwrap.dedent(f"""\
        apiVersion: kustomize.config.k8s.io/v1beta1
        kind: Kustomization
        resources:
          - {os.path.relpath(REPO / "deploy", directory)}
        patches:
          - path: placement.yaml
        """))  # fmt: skip
    return directory


@pytest.fixture(scope="module")
def deployed_pods(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """deploy/ applied with ``kubectl apply -k``; its Deployment once
    Available (every replica ready); deleted after the module, with its pods."""
    if not operator_image_current(images_dir()):
        pytest.skip("the operator's image is not built from this tree (python -m tests.build)")
    kustomization = overlay(tmp_path_factory.mktemp("deploy"))
    with cluster.admin() as admin:
        try:
            kubectl(cluster, "apply", "-k", str(kustomization), timeout=120)
            try:
                available = eventually("the operator's Deployment Available",
                                       lambda: _available(admin), 300)  # fmt: skip
            except AssertionError as error:
                raise AssertionError(f"{error}\n{_said(cluster)}") from None
            yield available
        finally:
            if admin.find(DEPLOYMENT) is not None:
                admin.delete(DEPLOYMENT)
            eventually("the operator's pods gone",
                       lambda: not admin.get(PODS, labelSelector=SELECTOR)["items"], 120)  # fmt: skip


def _said(cluster: LocalCluster) -> str:
    """What the operator's pods and their events say, for a failure's message."""
    pods = kubectl(cluster, "get", "pods", "-n", DEPLOY_NAMESPACE, "-o", "wide", check=False)
    events = kubectl(cluster, "get", "events", "-n", DEPLOY_NAMESPACE, check=False)
    logs = kubectl(cluster, "logs", "-n", DEPLOY_NAMESPACE, "-l", SELECTOR, "--tail", "20",
                   "--prefix", check=False)  # fmt: skip
    return "\n".join(done.stdout + done.stderr for done in (pods, events, logs))


def _available(admin: Api) -> dict[str, Any] | None:
    deployment = admin.get(DEPLOYMENT)
    status = deployment.get("status") or {}
    wanted = deployment["spec"]["replicas"]
    ready = status.get("readyReplicas") == status.get("updatedReplicas") == wanted
    return (
        deployment if ready and condition(deployment, "Available").get("status") == "True" else None
    )


def test_its_pods_run_the_dockerfiles_image_as_deploy_says(
    cluster: LocalCluster, admin: Api, deployed_pods: dict[str, Any]
):
    pods = admin.get(PODS, labelSelector=SELECTOR)["items"]
    assert len(pods) == deployed_pods["spec"]["replicas"] == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] in {n.name for n in REAL_NODES}
        (container,) = pod["status"]["containerStatuses"]
        assert container["ready"] and container["image"].endswith(OPERATOR_IMAGE.split("/", 1)[1])
        name = pod["metadata"]["name"]
        said = kubectl(cluster, "exec", "-n", DEPLOY_NAMESPACE, name, "--", "sh", "-c",
                       "id -u; grep -E '^(CapEff|Seccomp):' /proc/self/status; "
                       "touch /probe 2>&1 || true").stdout  # fmt: skip
        lines = said.splitlines()
        assert lines[0] == "65532", said
        assert "CapEff:\t0000000000000000" in said and "Seccomp:\t2" in said, said
        assert "Read-only file system" in said, said
    # kopf's peering names each replica by its pod (POD_ID, from the downward API)
    peering = "/apis/kopf.dev/v1/clusterkopfpeerings/fluxhop-operator"
    names = {p["metadata"]["name"] for p in pods}
    eventually("both replicas in the peering, by pod name",
               lambda: names <= set(admin.get(peering).get("status") or {}), 120)  # fmt: skip


def test_it_reconciles_a_minicluster_to_succeeded(
    cluster: LocalCluster, admin: Api, namespace: str, deployed_pods: dict[str, Any]
):
    document = example(cluster, "tests__hello-world__minicluster.yaml")
    path = MINICLUSTERS.format(namespace)
    admin.create(path, document)
    name = document["metadata"]["name"]

    def succeeded() -> dict[str, Any] | None:
        found = admin.get(f"{path}/{name}")
        return found if condition(found, "Succeeded").get("status") == "True" else None

    try:
        done = eventually("Succeeded, by the operator's pods", succeeded, 300)
    except AssertionError as error:
        logs = [kubectl(cluster, "logs", "-n", DEPLOY_NAMESPACE, p["metadata"]["name"],
                        "--tail", "30", check=False).stdout
                for p in admin.get(PODS, labelSelector=SELECTOR)["items"]]  # fmt: skip
        raise AssertionError(f"{error}\noperator logs:\n" + "\n---\n".join(logs)) from None
    assert done["status"]["exitCode"] == 0
    job = admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
    managers = {m["manager"] for m in job["metadata"]["managedFields"]}
    assert "fluxhop-operator" in managers, managers
