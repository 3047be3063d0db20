"""A registry (distribution v3, built from its Go module) serving a storage
directory: the images' build pushes into it, the test cluster's nodes pull
from it (their containerd's mirror configuration names it for every
registry host, tests/realk8s/node/config.py)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2 as httpx
import yaml

from tests.realk8s.processes import Process

__all__ = ["Registry", "registry_config", "repository_name"]


def registry_config(storage: Path, address: str) -> str:
    return yaml.safe_dump(
        {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(storage)},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {"addr": address},
        }
    )


class Registry:
    """``registry serve`` on ``address`` (host:port) over ``storage``."""

    def __init__(self, binary: Path, storage: Path, address: str, workdir: Path) -> None:
        self.url = f"http://{address}"
        config = workdir / "registry.yaml"
        workdir.mkdir(parents=True, exist_ok=True)
        config.write_text(registry_config(storage, address))
        self.process = Process("registry", [str(binary), "serve", str(config)], workdir)

    def start(self, timeout: float = 60) -> Registry:
        self.process.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/v2/", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if not self.process.alive():
                raise RuntimeError(f"the registry exited:\n{self.process.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the registry did not answer in {timeout:.0f} s")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.stop()


def repository_name(image: str) -> str:
    """The registry's name for ``image`` (with its tag): its registry host is
    the first path component, as the nodes' mirror configuration maps each
    host to ``/v2/<host>/`` of the registry (tests/realk8s/node/config.py)."""
    first, _, rest = image.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        first, rest = "docker.io", image  # a short name is Docker Hub's
    if first == "docker.io" and "/" not in rest:
        rest = f"library/{rest}"
    return f"{first}/{rest}"
