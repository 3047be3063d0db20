"""The operator's fixtures: the fake API server without its stand-in Flux
Operator (fluxhop's operator does that work here)."""

from __future__ import annotations

import pytest

from tests.cluster.fakeapi import DEFAULT_CRDS, FakeAPIServer


@pytest.fixture(autouse=True)
def forgetful_operator(monkeypatch):
    """Each test's operator remembers only its own writes (operator/cache.py)."""
    from fluxhop.operator import cache

    monkeypatch.setattr(cache, "_written", {})


@pytest.fixture
def fake(request):
    """The fake API server; ``@pytest.mark.parametrize("fake", [KINDS],
    indirect=True)`` serves those CRD kinds too (e.g. Kueue's)."""
    server = FakeAPIServer(crds=DEFAULT_CRDS | set(getattr(request, "param", ())))
    server.flux_operator = False  # fluxhop's operator does the Flux Operator's work here
    yield server
    server.close()
