"""Local MiniClusters behind :class:`fluxhop.Client` (``backend="local"``):
the same verbs as on Kubernetes, for instances this process started."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

from fluxhop.errors import AlreadyExists, InputError, NotFound
from fluxhop.local.instance import LocalInstance
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload import Status

__all__ = ["LocalMiniClusters"]


class _Discard(io.TextIOBase):
    """Rank 0's output is kept for logs(), not printed, in library use."""

    def write(self, text: str) -> int:
        return len(text)


class LocalMiniClusters:
    def __init__(self, *, flux: str | None = None, join_timeout: float = 60.0) -> None:
        self.flux = flux
        self.join_timeout = join_timeout
        self.instances: dict[str, LocalInstance] = {}

    def create(self, spec: MiniCluster) -> str:
        if spec.name in self.instances:
            raise AlreadyExists(
                f"local MiniCluster {spec.name} is already running; delete it first"
            )
        instance = LocalInstance(
            spec,
            flux=self.flux,
            join_timeout=self.join_timeout,
            stdout=_Discard(),
            stderr=_Discard(),
        )
        instance.start()
        self.instances[spec.name] = instance
        return spec.name

    def require(self, name: str) -> LocalInstance:
        try:
            return self.instances[name]
        except KeyError:
            raise NotFound(f"no local MiniCluster {name} in this process") from None

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

    def wait(self, name: str, timeout: float | None) -> Status:
        self.require(name).wait(timeout=timeout)
        return self.status(name)

    def logs(self, name: str) -> Iterator[str]:
        return (line for line in self.require(name).lines())

    def scale(self, name: str, size: int) -> Status:
        raise InputError("a local MiniCluster cannot be resized; delete it and create it again")

    def delete(self, name: str) -> None:
        self.require(name).stop()
        del self.instances[name]

    def close(self) -> None:
        for name in list(self.instances):
            self.delete(name)
