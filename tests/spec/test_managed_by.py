"""spec.managedBy (a fluxhop extension): a controller's name as a Job's
spec.managedBy takes one; anything else is one line naming the field."""

from __future__ import annotations

import pytest

from fluxhop.errors import SpecError
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc


def spec(managed_by: str) -> MiniCluster:
    doc = minicluster_doc("demo", containers=[{"image": "ubuntu:noble"}])
    doc["spec"]["managedBy"] = managed_by
    return MiniCluster.from_dict(doc)


@pytest.mark.parametrize("name", ["kueue.x-k8s.io/multikueue", "fluxhop.io/operator", "a.io/b/c"])
def test_a_domain_prefixed_path_is_taken(name):
    assert spec(name).spec.managed_by == name
    assert spec(name).spec.managed_elsewhere == (name != "fluxhop.io/operator")


@pytest.mark.parametrize(
    "name", ["multikueue", "/multikueue", "kueue.x-k8s.io/", "Kueue.io/x", "k.io/" + "x" * 60]
)
def test_anything_else_is_one_line(name):
    with pytest.raises(SpecError) as caught:
        spec(name)
    said = str(caught.value)
    assert "managedBy" in said and "domain-prefixed path" in said and "\n" not in said
