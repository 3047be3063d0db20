"""The Flux Operator on the test cluster (issue #35): built from
../shared/upstream/flux-operator as upstream ships it, started with its own
ServiceAccount and ClusterRole, its pods running real Flux in both of its
modes: Flux from its view image (the view init container copies the Flux
install into a shared volume) and Flux in the application image
(``flux.container.disable``). On the real nodes it runs as upstream's
Deployment from its image (its binary on Debian with libczmq). Both on the
real nodes when the cluster has them: the view image built here (the
project's Flux as a Spack tree in /opt/software) and the example's
``ubuntu:noble``, pulled; with the view disabled, an image with Flux
installed in /usr, as upstream's flux-sched images have it: the Flux
Operator mounts an emptyDir over ``/opt/software`` in every pod and, with
the view disabled, copies nothing into it (pkg/flux/view.go)."""

from __future__ import annotations

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.fluxoperator import NAMESPACE, PODS, SELECTOR, FluxOperator
from tests.realk8s.images.peer_images import FLUX_OPERATOR_IMAGE
from tests.realk8s.outcomes import run, upstream_example
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.tools import kubectl

pytestmark = pytest.mark.usefixtures("needs_flux")


def test_its_view_image_gives_the_pods_flux(
    cluster: LocalCluster, admin: Api, namespace: str, flux_operator: FluxOperator
):
    document = upstream_example("tests__hello-world__minicluster.yaml")  # size 4, quiet
    document = placed_minicluster(cluster, document)
    outcome = run(admin, namespace, document, flux_operator=True)
    assert outcome.finished == "Succeeded", flux_operator.log()
    assert outcome.rank0_log.split("\n").count("hello world") == 1, outcome.rank0_log
    pod_spec = outcome.job["spec"]["template"]["spec"]
    assert pod_spec["initContainers"][0]["image"].endswith("flux-view-ubuntu:tag-noble")


def test_flux_in_the_application_image(
    cluster: LocalCluster, admin: Api, namespace: str, flux_operator: FluxOperator
):
    document = upstream_example("tests__hello-world__minicluster.yaml")
    document["spec"]["size"] = 2
    document["spec"]["flux"] = {"container": {"disable": True}}
    document["spec"]["containers"][0]["image"] = "host"  # an image with Flux installed
    document = placed_minicluster(cluster, document)
    outcome = run(admin, namespace, document, flux_operator=True, timeout=200)
    assert outcome.finished == "Succeeded", flux_operator.log()
    assert "hello world" in outcome.rank0_log.split("\n"), outcome.rank0_log


def test_it_runs_as_upstreams_deployment_on_the_real_nodes(
    cluster: LocalCluster, admin: Api, real_nodes: list[str], flux_operator: FluxOperator
):
    """Its binary in a container of its own image, not a process here: on a
    real node, as uid 65532 (upstream asks runAsNonRoot), Ready by
    upstream's probe, with its ServiceAccount's token."""
    assert flux_operator.in_pod and flux_operator.process is None
    (pod,) = admin.get(PODS, labelSelector=SELECTOR)["items"]
    assert pod["spec"]["nodeName"] in real_nodes
    assert pod["spec"]["serviceAccountName"] == "operator-controller-manager"
    (container,) = pod["status"]["containerStatuses"]
    assert container["ready"], container
    assert container["image"].endswith(FLUX_OPERATOR_IMAGE.split("/", 1)[1]), container
    said = kubectl(cluster, "exec", "-n", NAMESPACE, pod["metadata"]["name"], "--",
                   "sh", "-c", "id -u; ls /var/run/secrets/kubernetes.io/serviceaccount").stdout  # fmt: skip
    assert said.splitlines()[0] == "65532", said
    assert "token" in said.split(), said
