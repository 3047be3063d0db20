"""The Flux Operator on the test cluster (issue #35): built from
../shared/upstream/flux-operator as upstream ships it, started with its own
ServiceAccount and ClusterRole, its pods running real Flux in both of its
modes: Flux from its view image (the view init container copies the Flux
install into a shared volume) and Flux in the application image
(``flux.container.disable``). The view on the real nodes when the cluster
has them: the view image built here (the project's Flux as a Spack tree)
and the example's ``ubuntu:noble``, pulled. Flux in the application image
on the Python kubelet's nodes, the host standing in for the image: the
Flux Operator mounts an emptyDir over ``/opt/software`` in every pod, the
view disabled or not (controllers/flux/volumes.go), and the Flux built here
lives there, as the view images' Spack tree needs it (upstream's flux-sched
images install Flux in /usr)."""

from __future__ import annotations

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.fluxoperator import FluxOperator
from tests.realk8s.outcomes import run, upstream_example
from tests.realk8s.placing import placed_minicluster

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


def test_flux_in_the_application_image(admin: Api, namespace: str, flux_operator: FluxOperator):
    document = upstream_example("tests__hello-world__minicluster.yaml")
    document["spec"]["size"] = 2
    document["spec"]["flux"] = {"container": {"disable": True}}
    outcome = run(admin, namespace, document, flux_operator=True, timeout=200)
    assert outcome.finished == "Succeeded", flux_operator.log()
    assert "hello world" in outcome.rank0_log.split("\n"), outcome.rank0_log
