"""The same work under the Flux Operator and then under ``fluxhop operator``,
each in a namespace of its own, never both at once: both watch
``miniclusters.flux-framework.org``, the Flux Operator in every namespace.
The Flux Operator starts only once no MiniCluster exists anywhere and
deletes every MiniCluster before it stops (tests/realk8s/fluxoperator.py);
fluxhop's watches its own namespace only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.fluxoperator import FluxOperator
from tests.realk8s.test_operator import Operator
from tests.realk8s.tools import scratch_namespace

T = TypeVar("T", covariant=True)


class Work(Protocol[T]):
    def __call__(self, admin: Api, namespace: str, log: Callable[[], str], *,
                 flux_operator: bool) -> T: ...  # fmt: skip


def side_by_side(cluster: LocalCluster, deployed: Path, directory: Path,
                 work: Work[T], *, processes: bool = False) -> tuple[T, T]:  # fmt: skip
    """(what ``work`` gave under the Flux Operator, under fluxhop's); ``log``
    gives the operator's log so far. ``processes``: both operators run as
    processes beside the cluster, their pods' CPU requests left to the
    MiniClusters (a module that asks for it says why)."""
    theirs = FluxOperator(cluster, process=processes)
    try:
        theirs.start()
        with scratch_namespace(cluster) as (admin, namespace):
            upstream = work(admin, namespace, lambda: theirs.log(400), flux_operator=True)
    finally:
        theirs.stop()
    log = directory / "operator.log"
    with scratch_namespace(cluster) as (admin, namespace):
        ours = Operator(cluster, deployed, namespace, log, process=processes)
        try:
            mine = work(admin, namespace, ours.text, flux_operator=False)
        finally:
            ours.stop()
    return upstream, mine
