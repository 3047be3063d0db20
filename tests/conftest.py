"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance import CONFORMANCE


@pytest.fixture(scope="session")
def conformance() -> Path:
    return CONFORMANCE


# The fake API server, kubeconfig and stand-in flux fixtures, for every test package.
pytest_plugins = ["tests.cluster.fixtures", "tests.local.fakeflux"]
