"""The kopf handlers, called as plain functions against the fake API server."""

from __future__ import annotations

import kopf
import pytest

from fluxhop.cluster.api import Kube
from fluxhop.operator import handlers
from fluxhop.operator.reconcile import FIELD_MANAGER
from tests.cluster.fakeapi import FakeAPIServer
from tests.operator.test_reconcile import conditions, resource


@pytest.fixture
def fake():
    server = FakeAPIServer()
    server.flux_operator = False
    yield server
    server.close()


@pytest.fixture
def connected(fake, kubeconfig, monkeypatch):
    made = []

    def connect(namespace: str) -> Kube:
        kube = Kube.connect(
            str(kubeconfig),
            namespace=namespace,
            transport=fake.transport(),
            field_manager=FIELD_MANAGER,
        )
        made.append(kube)
        return kube

    monkeypatch.setattr(handlers, "connect", connect)
    monkeypatch.setattr(handlers, "selector", {})
    return made


def test_a_new_resource_is_reconciled_with_the_operators_field_manager(fake, connected, kube):
    kube.apply(resource())
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    assert fake.get("Job", "demo") is not None
    applies = [r for r in fake.requests if r.verb == "APPLY"]
    assert applies and all(r.params.get("fieldManager") == FIELD_MANAGER for r in applies[1:])


def test_pod_events_bring_the_status_up_to_date(fake, connected, kube):
    kube.apply(resource())
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    for _ in range(50):
        fake.reconcile()
        pods = [o for o in fake.objects(kinds=("Pod",))]
        if len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods):
            break
    for pod in pods:
        handlers.on_pod(body=pod, namespace="default")
    cr = fake.get("MiniCluster", "demo")
    assert conditions(cr)["Ready"] == "True" and cr["status"]["brokersUp"] == 2


def test_pods_of_other_minicluster_kinds_are_left_alone(fake, connected, kube):
    from fluxhop.cluster.operations import MiniClusters
    from fluxhop.spec.flags import minicluster_from_flags

    MiniClusters(kube).create(minicluster_from_flags([], image="ubuntu", nodes=1, name="plain"))
    fake.reconcile()
    (pod,) = fake.objects(kinds=("Pod",))
    before = len(fake.requests)
    handlers.on_pod(body=pod, namespace="default")
    assert [r.verb for r in fake.requests[before:]] == ["GET"]  # looked, wrote nothing


def test_the_selector_picks_the_resources(monkeypatch):
    monkeypatch.setattr(handlers, "selector", {"team": "a"})
    assert handlers._selected({"team": "a", "x": "y"})
    assert not handlers._selected({"team": "b"})
    assert not handlers._selected({})


def test_settings_peer_and_keep_kopfs_state_under_fluxhops_prefix():
    settings = kopf.OperatorSettings()
    handlers.configure(settings=settings)
    assert settings.peering.name == handlers.PEERING and settings.peering.mandatory
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)


def test_the_api_refusing_is_a_retry_not_a_crash(fake, connected, kube):
    kube.apply(resource())
    fake.fail("POST", "/jobs", 403, times=10)
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    cr = fake.get("MiniCluster", "demo")
    failed = next(c for c in cr["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ApplyFailed" and "forbidden" in failed["message"]
