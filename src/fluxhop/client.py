"""``fluxhop.Client``: the Python API, shaped like the Kubeflow SDK's client.

>>> from fluxhop import Client
>>> client = Client(namespace="team")                  # kubectl's config
>>> name = client.create(MiniCluster.from_yaml(text))
>>> status = client.wait(name, timeout=600)
>>> print("".join(client.logs(name)))
>>> client.delete(name)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fluxhop.cluster.api import DEFAULT_REQUEST_TIMEOUT, Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.documents import read_input
from fluxhop.errors import InputError, WaitTimeout
from fluxhop.local.backend import LocalMiniClusters
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload import Root, Status

__all__ = ["Client"]

BACKENDS = ("kubernetes", "local")


class Client:
    """MiniClusters in one namespace of a Kubernetes cluster.

    ``namespace`` and ``context`` default to the kubeconfig's, found the way
    kubectl finds it (``kubeconfig`` argument, ``KUBECONFIG``, ``~/.kube/config``,
    in-cluster). ``target`` picks the workload: ``job`` (default), ``jobset``,
    or ``minicluster`` for clusters that run the Flux Operator.

    ``backend="local"`` runs each MiniCluster as brokers on this machine with
    the ``flux`` on PATH instead (no cluster); they live as long as this
    client: ``close()`` stops them.
    """

    def __init__(
        self,
        namespace: str | None = None,
        context: str | None = None,
        *,
        kubeconfig: str | None = None,
        backend: str = "kubernetes",
        target: Target | str = Target.JOB,
        cluster_domain: str = "cluster.local",
        transport: Any = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        if backend not in BACKENDS:
            raise InputError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        self.backend = backend
        self.target = Target.parse(target)
        self.cluster_domain = cluster_domain
        self._connect = {
            "kubeconfig": kubeconfig,
            "context": context,
            "namespace": namespace,
            "transport": transport,
            "request_timeout": request_timeout,
        }
        self._ops: MiniClusters | None = None
        self._local: LocalMiniClusters | None = LocalMiniClusters() if backend == "local" else None

    @property
    def ops(self) -> MiniClusters:
        if self._local is not None:
            raise InputError(
                "a local client has no Kubernetes operations; use backend='kubernetes'"
            )
        if self._ops is None:
            self._ops = MiniClusters(Kube.connect(**self._connect))
        return self._ops

    @property
    def namespace(self) -> str:
        return "local" if self._local is not None else self.ops.kube.namespace

    @staticmethod
    def _spec(spec: MiniCluster | str | dict[str, Any]) -> MiniCluster:
        if isinstance(spec, MiniCluster):
            return spec
        if isinstance(spec, dict):
            return MiniCluster.from_dict(spec)
        text = read_input(spec) if "\n" not in spec and Path(spec).is_file() else spec
        return MiniCluster.from_yaml(text)

    def create(
        self, spec: MiniCluster | str | dict[str, Any], *, target: Target | str | None = None
    ) -> str:
        """Create the MiniCluster (a model, a YAML text or file, or a dict); return its name."""
        if self._local is not None:
            return self._local.create(self._spec(spec))
        return self.ops.create(
            self._spec(spec), target or self.target, cluster_domain=self.cluster_domain
        ).name

    def get(self, name: str) -> Status:
        if self._local is not None:
            return self._local.status(name)
        return self.ops.status(self.ops.require(name))

    def list(self) -> list[Status]:
        if self._local is not None:
            return self._local.list()
        return self.ops.list()

    def wait(self, name: str, timeout: float | None = 600) -> Status:
        """Wait until rank 0 has exited; the status carries its exit code."""
        if self._local is not None:
            return self._local.wait(name, timeout)
        root: Root = self.ops.require(name)
        self.ops.wait_exit(root, timeout=timeout)
        status = self.ops.status(root)
        if status.exit_code is None:
            raise WaitTimeout(f"MiniCluster {name} finished but rank 0 reported no exit code")
        return status

    def logs(self, name: str, follow: bool = False) -> Iterator[str]:
        """Rank 0's output (the job's output), line by line."""
        if self._local is not None:
            return self._local.logs(name)
        return self.ops.logs(self.ops.require(name), follow=follow)

    def scale(self, name: str, size: int) -> Status:
        if self._local is not None:
            return self._local.scale(name, size)
        root = self.ops.scale(self.ops.require(name), size)
        return self.ops.status(root)

    def delete(self, name: str) -> None:
        if self._local is not None:
            self._local.delete(name)
            return
        self.ops.delete(name)

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
        if self._ops is not None:
            self._ops.kube.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
