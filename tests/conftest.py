"""Shared fixtures."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.conformance import CONFORMANCE
from tests.realflux import missing_flux, missing_fluxion
from tests.realflux.schedulers import FLUXION, SCHEDULERS, Scheduler


@pytest.fixture(scope="session")
def conformance() -> Path:
    return CONFORMANCE


def pytest_configure(config: pytest.Config) -> None:
    """A test run started in the background by a non-interactive shell (as
    CI's may be) ignores Ctrl-C, and every child would inherit that: a test
    that sends a child SIGINT (fluxhop run's cleanup) would wait for nothing.
    Handled here, each child gets the default at exec."""
    for sig, handler in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, signal.SIG_DFL),
    ):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)


# The fake API server, kubeconfig and stand-in flux fixtures, for every test package.
pytest_plugins = ["tests.cluster.fixtures", "tests.local.fakeflux"]


@pytest.fixture(scope="module", params=SCHEDULERS, ids=str)
def scheduler(request: pytest.FixtureRequest) -> Scheduler:
    """Fluxion, then sched-simple (tests/realflux/schedulers.py); Fluxion's
    run skips where the flux-core found does not have it."""
    chosen: Scheduler = request.param
    reason = missing_fluxion() if chosen is FLUXION else missing_flux()
    if reason:
        pytest.skip(reason)
    return chosen
