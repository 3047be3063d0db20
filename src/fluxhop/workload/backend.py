"""The one interface behind :class:`fluxhop.Client`: what a place that runs
MiniClusters does. Two implementations: Kubernetes
(``fluxhop.cluster.backend``) and this machine (``fluxhop.local.backend``).
The CLI, the Python API and the rabbit hooks all speak it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.status import Status

__all__ = ["Backend"]


class Backend(Protocol):
    @property
    def namespace(self) -> str:
        """Where the MiniClusters live ("local" on this machine)."""
        ...

    def in_namespace(self, namespace: str) -> Backend:
        """The same backend, aimed at another namespace."""
        ...

    def create(
        self,
        spec: MiniCluster,
        target: Target,
        *,
        cluster_domain: str = "cluster.local",
        owners: Sequence[dict[str, Any]] = (),
    ) -> str:
        """Start ``spec``; return its name. ``owners`` own it (garbage collection)."""
        ...

    def owners(self, name: str) -> list[dict[str, Any]] | None:
        """The ownerReferences of MiniCluster ``name``, or None when there is none."""
        ...

    def status(self, name: str) -> Status: ...

    def list(self) -> list[Status]: ...

    def wait(self, name: str, timeout: float | None) -> Status:
        """Until rank 0 is done (an interactive one: until it stops); its status."""
        ...

    def logs(self, name: str, *, follow: bool = False) -> Iterator[str]:
        """Rank 0's output, line by line."""
        ...

    def scale(self, name: str, size: int) -> Status: ...

    def delete(self, name: str) -> None: ...

    def close(self) -> None: ...
