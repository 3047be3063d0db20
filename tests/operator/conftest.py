"""The operator's fixtures: the fake API server without its stand-in Flux
Operator (fluxhop's operator does that work here), and rank 0 answering."""

from __future__ import annotations

import pytest

from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.fakeexec import exec_through_fake
from tests.operator.rank0 import Rank0


@pytest.fixture(autouse=True)
def forgetful_operator(monkeypatch):
    """Each test's operator remembers only its own writes (operator/cache.py)."""
    from fluxhop.operator import cache

    monkeypatch.setattr(cache, "_written", {})


@pytest.fixture
def fake():
    server = FakeAPIServer()
    server.flux_operator = False  # fluxhop's operator does the Flux Operator's work here
    yield server
    server.close()


@pytest.fixture
def rank0(fake):
    """Rank 0's answers; the brokers run until stopped."""
    answers = Rank0()
    fake.runner = lambda pod, index: None
    fake.exec_runner = answers.execute
    with exec_through_fake():
        yield answers
