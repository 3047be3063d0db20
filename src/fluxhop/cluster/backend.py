"""The Kubernetes backend: MiniClusters in one namespace of a cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from fluxhop.cluster.operations import MiniClusters
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.status import Status

__all__ = ["KubernetesBackend"]


class KubernetesBackend:
    """:class:`fluxhop.workload.backend.Backend` on a Kubernetes cluster."""

    def __init__(self, ops: MiniClusters) -> None:
        self.ops = ops

    @property
    def namespace(self) -> str:
        return self.ops.kube.namespace

    def in_namespace(self, namespace: str) -> KubernetesBackend:
        if namespace == self.namespace:
            return self
        return KubernetesBackend(
            MiniClusters(self.ops.kube.in_namespace(namespace), clock=self.ops.clock)
        )

    def create(
        self,
        spec: MiniCluster,
        target: Target,
        *,
        cluster_domain: str = "cluster.local",
        owners: Sequence[dict[str, Any]] = (),
    ) -> str:
        return self.ops.create(spec, target, cluster_domain=cluster_domain, owners=owners).name

    def owners(self, name: str) -> list[dict[str, Any]] | None:
        root = self.ops.find(name)
        return None if root is None else list(root.obj["metadata"].get("ownerReferences") or [])

    def status(self, name: str) -> Status:
        return self.ops.status(self.ops.require(name))

    def list(self) -> list[Status]:
        return self.ops.list()

    def wait(self, name: str, timeout: float | None) -> Status:
        root = self.ops.require(name)
        code = self.ops.wait_exit(root, timeout=timeout)
        status = self.ops.status(root)  # read again: rank 0's pod may be gone by now
        if status.exit_code != code or status.state not in ("Succeeded", "Failed"):
            state = "Succeeded" if code == 0 else "Failed"
            status = dataclasses.replace(status, exit_code=code, state=state)
        return status

    def logs(self, name: str, *, follow: bool = False) -> Iterator[str]:
        return self.ops.logs(self.ops.require(name), follow=follow)

    def scale(self, name: str, size: int) -> Status:
        return self.ops.status(self.ops.scale(self.ops.require(name), size))

    def delete(self, name: str) -> None:
        self.ops.delete(name)

    def close(self) -> None:
        self.ops.kube.close()
