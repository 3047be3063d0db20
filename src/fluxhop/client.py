"""``fluxhop.Client``: the Python API, shaped like the Kubeflow SDK's client.

>>> from fluxhop import Client
>>> client = Client(namespace="team")                  # kubectl's config
>>> name = client.create(MiniCluster.from_yaml(text))
>>> status = client.wait(name, timeout=600)
>>> print("".join(client.logs(name)))
>>> client.delete(name)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fluxhop.arguments import checked
from fluxhop.cluster.api import DEFAULT_REQUEST_TIMEOUT, Kube
from fluxhop.cluster.backend import KubernetesBackend
from fluxhop.cluster.inside import Inside
from fluxhop.cluster.operations import MiniClusters
from fluxhop.documents import read_input
from fluxhop.errors import InputError, shown
from fluxhop.flux.jobopts import JobOptions
from fluxhop.local.backend import LocalMiniClusters
from fluxhop.local.inside import LocalInside
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.names import dns_label_problem
from fluxhop.workload import Status
from fluxhop.workload.backend import Backend
from fluxhop.workload.inside import InstanceStatus, Job
from fluxhop.workload.verbs import FluxVerbs

__all__ = ["Client"]

BACKENDS = ("kubernetes", "local")


def _label(where: str, what: str, value: str) -> str:
    """``value`` when it is a DNS label, as every MiniCluster name and namespace
    is: the CLI's rule for NAME, so that no ``..`` or ``a/b`` walks API paths."""
    problem = dns_label_problem(value)
    if problem:
        raise InputError(f"{where}: {what} {shown(value)} {problem}")
    return value


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

    @checked
    def __init__(
        self,
        namespace: str | None = None,
        context: str | None = None,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        backend: str = "kubernetes",
        target: Target | str = Target.JOB,
        cluster_domain: str = "cluster.local",
        transport: Any = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        if backend not in BACKENDS:
            raise InputError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        if namespace is not None:
            _label("Client", "namespace", namespace)
        self.backend_name = backend
        self.target = Target.parse(target)
        self.cluster_domain = cluster_domain
        self._connect = {
            "kubeconfig": os.fspath(kubeconfig) if kubeconfig is not None else None,
            "context": context,
            "namespace": namespace,
            "transport": transport,
            "request_timeout": request_timeout,
        }
        self._backend: Backend | None = LocalMiniClusters() if backend == "local" else None
        self._inside: FluxVerbs | None = None

    @property
    def backend(self) -> Backend:
        """The backend every verb goes through (Kubernetes: connected on first use)."""
        if self._backend is None:
            self._backend = KubernetesBackend(MiniClusters(Kube.connect(**self._connect)))
        return self._backend

    @property
    def ops(self) -> MiniClusters:
        """The Kubernetes operations underneath (for what only Kubernetes has)."""
        backend = self.backend
        if not isinstance(backend, KubernetesBackend):
            raise InputError(
                "a local client has no Kubernetes operations; use backend='kubernetes'"
            )
        return backend.ops

    @property
    def namespace(self) -> str:
        """The namespace the client works in (``local`` for the local backend)."""
        return self.backend.namespace

    @staticmethod
    def _spec(spec: MiniCluster | str | os.PathLike[str] | dict[str, Any]) -> MiniCluster:
        if isinstance(spec, MiniCluster):
            return spec
        if isinstance(spec, dict):
            return MiniCluster.from_dict(spec)
        if isinstance(spec, os.PathLike):
            return MiniCluster.from_yaml(read_input(os.fspath(spec)))
        text = read_input(spec) if "\n" not in spec and Path(spec).is_file() else spec
        return MiniCluster.from_yaml(text)

    @checked
    def create(
        self,
        spec: MiniCluster | str | os.PathLike[str] | dict[str, Any],
        *,
        target: Target | str | None = None,
    ) -> str:
        """Create the MiniCluster (a model, a YAML text, a file's path, or a dict);
        return its name."""
        model = self._spec(spec)
        chosen = Target.parse(target) if target is not None else self.target
        return self.backend.create(model, chosen, cluster_domain=self.cluster_domain)

    @checked
    def get(self, name: str) -> Status:
        """The MiniCluster's status: state, size, pods, rank 0's exit code."""
        return self.backend.status(_label("Client.get", "name", name))

    def list(self) -> list[Status]:
        """Every MiniCluster fluxhop created in the namespace."""
        return self.backend.list()

    @checked
    def wait(self, name: str, timeout: float | None = 600) -> Status:
        """Wait until rank 0 has exited; the status carries its exit code."""
        return self.backend.wait(_label("Client.wait", "name", name), timeout)

    @checked
    def logs(self, name: str, follow: bool = False) -> Iterator[str]:
        """Rank 0's output (the job's output), line by line."""
        return self.backend.logs(_label("Client.logs", "name", name), follow=follow)

    @checked
    def scale(self, name: str, size: int) -> Status:
        """Resize to ``size`` nodes, within the MiniCluster's maxSize."""
        return self.backend.scale(_label("Client.scale", "name", name), size)

    @checked
    def delete(self, name: str) -> None:
        """Delete the MiniCluster and everything it owns (one DELETE of its root)."""
        self.backend.delete(_label("Client.delete", "name", name))

    # --- inside a running MiniCluster (rank 0's flux, through kubectl exec) ----

    @property
    def inside(self) -> FluxVerbs:
        """The flux verbs on this client's running MiniClusters."""
        if self._inside is None:
            backend = self.backend
            if isinstance(backend, LocalMiniClusters):
                self._inside = LocalInside(backend.flux_root)
            else:
                self._inside = Inside(
                    self.ops,
                    kubeconfig=self._connect["kubeconfig"],
                    context=self._connect["context"],
                )
        return self._inside

    @checked
    def submit(
        self,
        name: str,
        command: Sequence[str],
        *,
        nodes: int | None = None,
        ntasks: int | None = None,
        cores: int | None = None,
        gpus: int | None = None,
        options: JobOptions | None = None,
        cc: str | None = None,
    ) -> str | list[str]:
        """Submit ``command`` (an argv list) into a running MiniCluster; its job
        ID, or with ``cc`` (e.g. ``"1-100"``) the list of them."""
        ids = self.inside.submit(
            _label("Client.submit", "name", name),
            list(command),
            nodes=nodes,
            ntasks=ntasks,
            cores=cores,
            gpus=gpus,
            options=(options or JobOptions()).words(),
            cc=cc,
        )
        return ids if cc is not None else ids[0]

    @checked
    def jobs(self, name: str, *, all_jobs: bool = False) -> list[Job]:
        """The jobs of a running MiniCluster (``all_jobs``: finished ones too)."""
        return self.inside.jobs(_label("Client.jobs", "name", name), all_jobs=all_jobs)

    @checked
    def status(self, name: str) -> InstanceStatus:
        """Brokers up/down per rank, resources free/allocated, the queue."""
        return self.inside.status(_label("Client.status", "name", name))

    @checked
    def cancel(self, name: str, jobid: str | Sequence[str]) -> None:
        """Cancel one job or several in a running MiniCluster."""
        jobids = [jobid] if isinstance(jobid, str) else list(jobid)
        self.inside.cancel(_label("Client.cancel", "name", name), jobids)

    @checked
    def attach(self, name: str, jobid: str) -> int:
        """Stream the job's output to this process's stdout; its exit code."""
        return self.inside.attach(_label("Client.attach", "name", name), jobid)

    def close(self) -> None:
        """Close the connection (a local backend: stop its MiniClusters)."""
        if self._backend is not None:
            self._backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
