"""The operator's fixtures: the fake API server without its stand-in Flux
Operator (fluxhop's operator does that work here)."""

from __future__ import annotations

import pytest

from fluxhop.cluster.api import Kube
from fluxhop.operator import handlers
from fluxhop.operator.resource import FIELD_MANAGER
from tests.cluster.fakeapi import DEFAULT_CRDS, FakeAPIServer


@pytest.fixture(autouse=True)
def forgetful_operator(monkeypatch):
    """Each test's operator remembers only its own writes (operator/cache.py)."""
    from fluxhop.operator import cache, memory

    monkeypatch.setattr(cache, "_written", {})
    for kept in ("leads", "versions", "unwaited", "remembered", "health_written"):
        monkeypatch.setattr(memory, kept, {})


@pytest.fixture
def fake(request):
    """The fake API server; ``@pytest.mark.parametrize("fake", [KINDS],
    indirect=True)`` serves those CRD kinds too (e.g. Kueue's)."""
    server = FakeAPIServer(crds=DEFAULT_CRDS | set(getattr(request, "param", ())))
    server.flux_operator = False  # fluxhop's operator does the Flux Operator's work here
    yield server
    server.close()


@pytest.fixture
def connected(fake, kubeconfig, monkeypatch):
    """The handlers (and the timers, through them) connect to the fake API server."""
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
