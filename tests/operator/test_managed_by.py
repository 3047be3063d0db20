"""A MiniCluster resource whose spec.managedBy names another controller is
left alone by fluxhop operator: no Job, no status, no event, valid or not;
tests/realk8s/test_operator_managed_by.py has the CRD refuse a change of it."""

from __future__ import annotations

import pytest

from fluxhop.operator.handlers import _selected
from fluxhop.operator.reconcile import Reconciler
from tests.operator.test_reconcile import current, events, resource


@pytest.fixture
def apply(kube):
    return kube.apply


@pytest.fixture
def reconciler(ops) -> Reconciler:
    return Reconciler(ops)


def test_another_controllers_resource_gets_no_write(fake, apply, reconciler: Reconciler):
    apply(resource(managedBy="kueue.x-k8s.io/multikueue"))
    before = len(fake.requests)
    out = reconciler.reconcile(current(fake))
    assert out.writes == [] and out.problem is None
    assert [r for r in fake.requests[before:] if r.method != "GET"] == []
    assert fake.get("Job", "demo") is None
    assert "status" not in current(fake) and events(fake) == []


def test_an_invalid_one_is_not_reported_either(fake, apply, reconciler: Reconciler):
    bad = resource(managedBy="kueue.x-k8s.io/multikueue")
    bad["spec"]["size"] = 0  # fluxhop would say Failed InvalidSpec: not its resource to say
    apply(bad)
    assert reconciler.reconcile(current(fake)).writes == []
    assert "status" not in current(fake)


def test_fluxhops_own_name_is_reconciled(fake, apply, reconciler: Reconciler):
    apply(resource(managedBy="fluxhop.io/operator"))
    reconciler.reconcile(current(fake))
    assert fake.get("Job", "demo") is not None


def test_the_handlers_never_select_it():
    ours = resource()
    theirs = resource(managedBy="kueue.x-k8s.io/multikueue")
    assert _selected({}, ours) and not _selected({}, theirs)
