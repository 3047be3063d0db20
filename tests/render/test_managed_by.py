"""A MiniCluster another controller keeps (spec.managedBy) is a resource to
hand over: fluxhop's Job and JobSet targets refuse it in one line; the
MiniCluster resource carries it to that controller (MultiKueue dispatches
it, and fluxhop operator runs the copy on a worker cluster)."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.render import render
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc


def spec(managed_by: str) -> MiniCluster:
    doc = minicluster_doc("demo", containers=[{"image": "ubuntu:noble"}])
    doc["spec"]["managedBy"] = managed_by
    return MiniCluster.from_dict(doc)


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_a_job_or_jobset_is_refused(target):
    with pytest.raises(SpecError) as caught:
        render(spec("kueue.x-k8s.io/multikueue"), target)
    said = str(caught.value)
    assert said.startswith("spec.managedBy kueue.x-k8s.io/multikueue") and "\n" not in said


def test_fluxhops_own_operator_is_no_other_controller():
    assert render(spec("fluxhop.io/operator"))[-1]["kind"] == "Job"


def test_the_resource_carries_it_to_that_controller():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FluxhopWarning)
        (resource,) = render(spec("kueue.x-k8s.io/multikueue"), "minicluster")
    assert resource["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
