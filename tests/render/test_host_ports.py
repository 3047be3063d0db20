"""Host ports in the pods fluxhop renders, and their absence from the Flux
Operator's resource (which has no such field)."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.schemas import validate

CERT = CurveCert.generate("hostports")


def spec(lead, sidecar=None):
    containers = [{"image": "ubuntu:noble", "command": "true", "runFlux": True, **lead}]
    if sidecar is not None:
        containers.append({"image": "busybox", "name": "side", **sidecar})
    return MiniCluster.from_dict(minicluster_doc("hp", size=2, containers=containers))


def pod_spec(objects):
    job = next(o for o in objects if o["kind"] in ("Job", "JobSet"))
    if job["kind"] == "JobSet":
        return job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return job["spec"]["template"]["spec"]


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_each_port_once_and_a_host_port_on_the_same_number(target):
    objects = render(spec({"ports": [9000, 30000], "hostPorts": [30000, 30001]},
                          {"hostPorts": [31000]}), target, cert=CERT)  # fmt: skip
    for obj in objects:
        validate(obj)
    flux, side = pod_spec(objects)["containers"]
    assert flux["ports"] == [
        {"name": "flux-broker", "containerPort": 8050, "protocol": "TCP"},
        {"containerPort": 9000, "protocol": "TCP"},
        {"containerPort": 30000, "hostPort": 30000, "protocol": "TCP"},
        {"containerPort": 30001, "hostPort": 30001, "protocol": "TCP"},
    ]
    assert side["ports"] == [{"containerPort": 31000, "hostPort": 31000, "protocol": "TCP"}]


def test_without_host_ports_nothing_is_published():
    (flux,) = pod_spec(render(spec({"ports": [9000]}), cert=CERT))["containers"]
    assert not any("hostPort" in port for port in flux["ports"])


def test_the_flux_operators_resource_goes_without_them():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (resource,) = render(spec({"hostPorts": [30000]}), "minicluster", cert=CERT)
    assert "hostPorts" not in resource["spec"]["containers"][0]
    said = [str(w.message) for w in caught if issubclass(w.category, FluxhopWarning)]
    assert (
        "spec.containers[0].hostPorts is not copied into the MiniCluster resource: it is a "
        "fluxhop extension the Flux Operator does not know" in said
    )
