"""The ``realk8s`` tier: fluxhop against a real Kubernetes control plane on
this machine (tests/realk8s/cluster.py), with real Flux in the pods where a
flux-core is installed.

Every test here that uses the ``cluster`` fixture carries the ``realk8s``
marker and skips, with the reason, where the cluster cannot run: no Go or no built binaries (``python -m
tests.realk8s.build``), not root, no ``ip``/``unshare``/``nsenter``, or
another test cluster already running on the machine. One cluster serves the
whole session; each test gets a namespace of its own, deleted (by the real
namespace controller) when it ends.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import CONFORMANCE, REPO
from tests.realflux import flux_prefix, missing_flux
from tests.realk8s.api import Api
from tests.realk8s.binaries import bin_dir, missing_binaries
from tests.realk8s.cluster import ClusterError, LocalCluster, NodeSpec
from tests.realk8s.tools import kubectl

HERE = Path(__file__).parent
FAULT = "fluxhop.test/fault"
NODES = [
    NodeSpec(
        "node-a", labels={"topology.kubernetes.io/zone": "zone-a"}, capacity={"nvidia.com/gpu": "2"}
    ),
    NodeSpec("node-b", labels={"topology.kubernetes.io/zone": "zone-b"}),
    # the node the fault tests stop: only pods that tolerate its taint land there
    NodeSpec(
        "node-c",
        labels={"topology.kubernetes.io/zone": "zone-c", FAULT: "yes"},
        taints=[{"key": FAULT, "value": "yes", "effect": "NoSchedule"}],
    ),
]


def missing_cluster() -> str | None:
    reason = missing_binaries()
    if reason:
        return reason
    if os.geteuid() != 0:
        return "the test cluster's kubelet needs root (network namespaces, mounts)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"the test cluster's kubelet needs {tool} (iproute2 / util-linux)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the teardown tests stop and restart the session's cluster: they go last
    items.sort(key=lambda item: Path(item.path).name == "test_teardown.py")
    reason = missing_cluster()
    for item in items:
        if Path(item.path).is_relative_to(HERE) and "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.realk8s)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    directory = bin_dir()
    assert directory is not None
    prefix = flux_prefix() if missing_flux() is None else None
    local = LocalCluster(directory, NODES, flux_prefix=prefix)
    try:
        local.start()
    except ClusterError as error:
        if "another test cluster" in str(error):
            pytest.skip(str(error))
        raise
    try:
        yield local
    finally:
        local.stop()
    left = local.leftovers()
    assert not left, f"the test cluster left behind: {left}"


@pytest.fixture(scope="session")
def crds(cluster: LocalCluster) -> None:
    """The CRDs of the targets fluxhop renders for controllers it does not
    run here: JobSet (upstream's, from the conformance data) and MiniCluster
    (deploy/'s: the Flux Operator's spec with fluxhop's status fields)."""
    files = [CONFORMANCE / "crds" / "jobset.x-k8s.io_jobsets.yaml", REPO / "deploy" / "crd.yaml"]
    for path in files:
        kubectl(cluster, "apply", "--server-side", "-f", str(path))
    kubectl(cluster, "wait", "--for=condition=Established", "--timeout=60s",
            "crd/jobsets.jobset.x-k8s.io", "crd/miniclusters.flux-framework.org")  # fmt: skip


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[Api]:
    with cluster.admin() as api:
        yield api


@pytest.fixture
def namespace(admin: Api) -> Iterator[str]:
    """A namespace of the test's own, deleted after it."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin.create("/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="session")
def needs_flux() -> Path:
    reason = missing_flux()
    if reason:
        pytest.skip(reason)
    prefix = flux_prefix()
    assert prefix is not None
    return prefix
