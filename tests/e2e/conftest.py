"""The real-Flux end-to-end layer: rendered MiniClusters boot real flux-core
brokers on simulated pods. It runs only where a flux-core is installed (see
tests/realflux.py) and as root (podsim makes network namespaces); elsewhere
every test here skips with the reason."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import PODSIM, Cluster
from tests.realflux import flux_prefix, missing_flux


def missing_podsim() -> str | None:
    reason = missing_flux()
    if reason:
        return reason
    if os.geteuid() != 0:
        return "podsim needs root (network namespaces)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"podsim needs {tool} (iproute2 / util-linux)"
    if not PODSIM.is_file():
        return f"no pod simulator at {PODSIM} (set FLUXHOP_PODSIM)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    reason = missing_podsim()
    for item in items:
        if Path(item.path).is_relative_to(here):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.flux)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the pods can see too: podsim gives every container a
    private /tmp, so a pytest tmp_path (under /tmp) would be hidden from them."""
    path = Path(tempfile.mkdtemp(prefix="fluxhop-e2e-", dir="/run"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def simulate(workdir: Path) -> Iterator:
    """``simulate(objects, timeout=...)`` -> a Cluster to run or start; any
    cluster still running at the end is interrupted (podsim then cleans up)."""
    started: list[Cluster] = []

    def make(objects: list[dict], timeout: float = 120) -> Cluster:
        prefix = flux_prefix()
        assert prefix is not None
        cluster = Cluster(objects, workdir, prefix, timeout)
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.stop()
