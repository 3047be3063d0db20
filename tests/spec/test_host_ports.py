"""spec.containers[].hostPorts (a fluxhop extension): what a spec may ask."""

from __future__ import annotations

import pytest

from fluxhop.errors import SpecError
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc


def doc(host_ports, **spec):
    container = {"image": "ubuntu:noble", "command": "true", "hostPorts": host_ports}
    return minicluster_doc("hp", size=2, containers=[container], **spec)


def test_host_ports_are_read():
    spec = MiniCluster.from_dict(doc([30001, 30000]))
    assert spec.spec.flux_container.host_ports == [30001, 30000]


@pytest.mark.parametrize(
    ("ports", "spec", "says"),
    [
        ([30000, 30000], {}, "spec.containers[0].hostPorts: lists port 30000 twice; list each "
                             "host port once"),
        ([70000], {}, "spec.containers[0].hostPorts[0]: Input should be less than or equal to 65535"),
        ([30000], {"pod": {"podsPerNode": 2}}, "pod.podsPerNode 2 puts pods side by side, but "
                                               "only one pod on a node can publish hostPorts"),
        ([30000], {"pod": {"securityProfile": "restricted"}, "flux": {"container": {"disable": True}}},
         "pod.securityProfile restricted: hostPorts publish ports on the node, which is not "
         "allowed; drop them"),
    ],
)  # fmt: skip
def test_what_cannot_be_is_one_line(ports, spec, says):
    with pytest.raises(SpecError) as caught:
        MiniCluster.from_dict(doc(ports, **spec))
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_two_containers_cannot_publish_one_port():
    document = doc([30000])
    document["spec"]["containers"][0]["runFlux"] = True
    document["spec"]["containers"].append(
        {"name": "side", "image": "busybox", "hostPorts": [30000]}
    )
    with pytest.raises(
        SpecError,
        match=r"containers\[1\]\.hostPorts: 30000 is published by "
        r"containers\[0\] already; publish it once$",
    ):
        MiniCluster.from_dict(document)
