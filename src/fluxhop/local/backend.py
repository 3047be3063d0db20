"""The local backend: MiniClusters as brokers on this machine, behind
:class:`fluxhop.Client` (``backend="local"``) and ``fluxhop run --local`` -
the same interface as on Kubernetes (:class:`fluxhop.workload.backend.Backend`),
for instances this process started."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator, Sequence
from typing import Any

from fluxhop.arguments import checked
from fluxhop.errors import AlreadyExists, InputError, NotFound
from fluxhop.local.broker import Sink
from fluxhop.local.instance import LocalInstance
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload import Status
from fluxhop.workload.verbs import refuse_closed

__all__ = ["LocalMiniClusters"]


class _Discard(io.TextIOBase):
    """Rank 0's output is kept for logs(), not printed, in library use."""

    def write(self, text: str) -> int:
        return len(text)


class LocalMiniClusters:
    """``stdout``/``stderr`` receive rank 0's output and the brokers' warnings
    (by default kept for logs() only, as library use wants)."""

    def __init__(
        self,
        *,
        flux: str | None = None,
        join_timeout: float = 60.0,
        stdout: Sink | None = None,
        stderr: Sink | None = None,
        verbose: bool = False,
    ) -> None:
        self.flux = flux
        self.join_timeout = join_timeout
        self.stdout = stdout
        self.stderr = stderr
        self.verbose = verbose
        self.instances: dict[str, LocalInstance] = {}

    @property
    def namespace(self) -> str:
        return "local"

    def in_namespace(self, namespace: str) -> LocalMiniClusters:
        return self  # one machine has one place

    @checked
    def create(
        self,
        spec: MiniCluster,
        target: Target = Target.JOB,
        *,
        cluster_domain: str = "cluster.local",
        owners: Sequence[dict[str, Any]] = (),
    ) -> str:
        """Start the brokers (the target and cluster domain mean nothing here)."""
        if owners:
            raise InputError("a local MiniCluster cannot be owned by a Kubernetes object")
        if spec.name in self.instances:
            raise AlreadyExists(
                f"local MiniCluster {spec.name} is already running; delete it first"
            )
        instance = LocalInstance(
            spec,
            flux=self.flux,
            join_timeout=self.join_timeout,
            stdout=self.stdout or _Discard(),
            stderr=self.stderr or _Discard(),
            verbose=self.verbose,
        )
        instance.start()
        self.instances[spec.name] = instance
        return spec.name

    @checked
    def owners(self, name: str) -> list[dict[str, Any]] | None:
        return [] if name in self.instances else None

    @checked
    def require(self, name: str) -> LocalInstance:
        try:
            return self.instances[name]
        except KeyError:
            raise NotFound(f"no local MiniCluster {name} in this process") from None

    @checked
    def status(self, name: str) -> Status:
        instance = self.require(name)
        running = sum(1 for b in instance.brokers if b.process.poll() is None)
        code = instance.exit_code
        if code is None and instance.brokers and instance.brokers[0].process.poll() is not None:
            code = instance.brokers[0].process.returncode
        state = "Running" if code is None else ("Succeeded" if code == 0 else "Failed")
        age = time.monotonic() - (instance.started or time.monotonic())
        pods = {"Running": running} if running else {}
        return Status(name, "local", instance.size, instance.size, state, age, pods, code)

    def list(self) -> list[Status]:
        return [self.status(name) for name in sorted(self.instances)]

    @checked
    def wait(self, name: str, timeout: float | None) -> Status:
        instance = self.require(name)
        if instance.interactive:
            instance.serve()  # up until a broker ends (or Ctrl-C)
        else:
            instance.wait(timeout=timeout)
        return self.status(name)

    @checked
    def wait_ready(self, name: str) -> str:
        """Until rank 0 takes connections; its FLUX_URI (for flux proxy)."""
        return self.require(name).wait_ready()

    @checked
    def flux_root(self, name: str, submit: bool = False) -> str:
        """Rank 0's Flux root once it takes jobs (for flux verbs, local/inside.py)."""
        instance = self.require(name)
        ended = instance.brokers and instance.brokers[0].process.poll() is not None
        refuse_closed(
            name,
            ended="rank 0 exited" if instance.exit_code is not None or ended else None,
            interactive=instance.interactive,
            submit=submit,
        )
        instance.wait_running()
        assert instance.layout is not None
        return instance.layout.flux_root(0)

    @checked
    def logs(self, name: str, *, follow: bool = False) -> Iterator[str]:
        return (line for line in self.require(name).lines())

    @checked
    def scale(self, name: str, size: int) -> Status:
        raise InputError("a local MiniCluster cannot be resized; delete it and create it again")

    @checked
    def delete(self, name: str) -> None:
        self.require(name).stop()
        del self.instances[name]

    def close(self) -> None:
        for name in list(self.instances):
            self.delete(name)
