"""The ``realk8s`` tier: fluxhop against a real Kubernetes control plane on
this machine (tests/realk8s/cluster.py), with real Flux in the pods where a
flux-core is installed.

Every test here that uses the ``cluster`` fixture carries the ``realk8s``
marker and skips, with the reason, where the cluster cannot run: no Go or
no built binaries (``python -m tests.realk8s.build``), no images
(``python -m tests.realk8s.images.build``), no runtime for the real nodes,
not root, no ``ip``/``unshare``/``nsenter``, or another test cluster
already running on the machine. One cluster serves the
whole session; each test gets a namespace of its own, deleted (by the real
namespace controller) when it ends.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import REPO
from tests.realflux import flux_prefix, missing_flux
from tests.realk8s.api import Api
from tests.realk8s.binaries import bin_dir
from tests.realk8s.cluster import ClusterError, LocalCluster, NodeSpec, missing_cluster, wait_until
from tests.realk8s.controllers import CONTROLLERS, Running, established, module_dir
from tests.realk8s.dws import Dws, missing_dws
from tests.realk8s.fluxoperator import FluxOperator, missing_flux_operator
from tests.realk8s.mpi import BUILD_DIR, FLAVOURS, build
from tests.realk8s.placing import REAL_NODES
from tests.realk8s.rabbit_site import machine, rabbits  # noqa: F401 (the DWS modules' fixtures)
from tests.realk8s.tools import kubectl

HERE = Path(__file__).parent
MARKED = "fluxhop.test/marked"
# The real nodes (placing.py), and kwok's node, whose pods read as running
# while nothing runs (kwok.py), for the scale benchmarks' tools: only pods
# that tolerate its taint land there
NODES = [
    *REAL_NODES,
    NodeSpec(
        "node-m",
        labels={"topology.kubernetes.io/zone": "zone-m"},
        taints=[{"key": MARKED, "value": "yes", "effect": "NoSchedule"}],
        kwok=True,
    ),
]
# The API server's audit log holds the requests of this namespace's
# ServiceAccounts, and of no one else (tests/realk8s/audit.py)
AUDITED_NAMESPACE = "fluxhop-audited"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the teardown tests stop and restart the session's cluster: they go last
    items.sort(key=lambda item: Path(item.path).name == "test_teardown.py")
    reason = missing_cluster()
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if Path(item.path).is_relative_to(HERE) and "cluster" in fixtures:
            item.add_marker(pytest.mark.realk8s)
            for controller in CONTROLLERS:  # their own markers: -m kueue, -m "not trainer", ...
                if controller in fixtures:
                    item.add_marker(getattr(pytest.mark, controller))
            # the Flux Operator's fixture, or a module holding both operators side by side
            if "flux_operator" in fixtures or Path(item.path).name.startswith("test_two_operators"):
                item.add_marker(pytest.mark.fluxoperator)
                peer = missing_flux_operator()
                if peer and not reason:
                    item.add_marker(pytest.mark.skip(reason=peer))
            if "dws" in fixtures:
                item.add_marker(pytest.mark.dws)
                peer = missing_dws()
                if peer and not reason:
                    item.add_marker(pytest.mark.skip(reason=peer))
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    directory = bin_dir()
    assert directory is not None
    prefix = flux_prefix() if missing_flux() is None else None
    local = LocalCluster(
        directory,
        NODES,
        flux_prefix=prefix,
        audited=(f"system:serviceaccounts:{AUDITED_NAMESPACE}",),
    )
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
def real_nodes(cluster: LocalCluster) -> list[str]:
    """The names of the cluster's real nodes."""
    return sorted(cluster.real_nodes)


@pytest.fixture(scope="session")
def crds(cluster: LocalCluster) -> None:
    """The CRDs of the targets fluxhop renders, without their controllers:
    JobSet's (from the release the jobset controller is built from) and the
    MiniCluster's (deploy/'s: the Flux Operator's spec, fluxhop's status)."""
    jobset = (
        module_dir("jobset", "sigs.k8s.io/jobset")
        / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
    )
    for path in (jobset, REPO / "deploy" / "crd.yaml"):
        kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(path))
    with cluster.admin() as api:
        for name in ("jobsets.jobset.x-k8s.io", "miniclusters.flux-framework.org"):
            crd = {"metadata": {"name": name}}
            wait_until(f"CRD {name} established", lambda crd=crd: established(api, crd), 60, [])


def _controller(cluster: LocalCluster, name: str) -> Iterator[Running]:
    running = Running(cluster, CONTROLLERS[name])
    try:
        running.start()
    except BaseException:
        running.stop()
        raise
    yield running
    running.stop()


@pytest.fixture(scope="session")
def jobset(cluster: LocalCluster) -> Iterator[Running]:
    """The JobSet controller and its webhooks, from sigs.k8s.io/jobset."""
    yield from _controller(cluster, "jobset")


@pytest.fixture(scope="session")
def kueue(cluster: LocalCluster, jobset: Running) -> Iterator[Running]:
    """Kueue (batch/job and JobSet integrations), from sigs.k8s.io/kueue."""
    yield from _controller(cluster, "kueue")


@pytest.fixture(scope="session")
def trainer(cluster: LocalCluster, jobset: Running) -> Iterator[Running]:
    """Kubeflow Trainer's controller manager (it makes JobSets: JobSet runs too)."""
    yield from _controller(cluster, "trainer")


@pytest.fixture(scope="module")
def flux_operator(cluster: LocalCluster, needs_flux: Path) -> Iterator[FluxOperator]:
    """The Flux Operator (tests/peers), for one module's tests: it watches
    every namespace, so it runs only while no other operator's MiniCluster
    exists (see tests/realk8s/fluxoperator.py)."""
    running = FluxOperator(cluster)
    try:
        running.start()
        yield running
    finally:
        running.stop()


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


@pytest.fixture(scope="module")
def dws(cluster: LocalCluster) -> Iterator[Dws]:
    """DWS's Workflow controller and webhook, NNF's CRDs and rule set
    (tests/realk8s/dws.py), for one module's tests."""
    running = Dws(cluster)
    try:
        yield running.start()
    finally:
        running.stop()


@pytest.fixture(scope="session")
def mpi_programs() -> Iterator[dict[str, Path]]:
    """The MPI matrix's program (tests/realk8s/mpi), built with each of
    Debian's MPI flavours installed here: flavour -> the binary."""
    yield {name: build(f) for name, f in FLAVOURS.items() if not f.missing()}
    shutil.rmtree(BUILD_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def needs_flux() -> Path:
    reason = missing_flux()
    if reason:
        pytest.skip(reason)
    prefix = flux_prefix()
    assert prefix is not None
    return prefix
