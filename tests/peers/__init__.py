"""Peers built from ``../shared/upstream/``: the systems fluxhop is measured
against that the Go module proxy does not serve: the Flux Operator, and
DWS's Workflow controller and admission webhook (one program, two modes).

Each is built by ``python -m tests.peers.build`` (part ``peers`` of
``python -m tests.build``) from a *copy* of its upstream folder, prepared as
upstream prepares the program it ships, into a cache outside the repository
named by a digest of that folder, the Go version and :data:`RECIPE`. Nothing
of it is copied into the project; nothing built is committed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.caches import user_cache
from tests.conformance import upstream
from tests.realk8s.binaries import go_version

__all__ = ["CACHE_VARIABLE", "DWS", "FLUX_OPERATOR", "PEERS", "Peer", "cache_root"]

CACHE_VARIABLE = "FLUXHOP_PEERS_CACHE"
# The build recipe's version: part of the digest, so a changed recipe rebuilds.
RECIPE = "1"


@dataclass(frozen=True)
class Peer:
    """One peer: where its source is, how upstream builds it, what it needs."""

    name: str  # its folder under ../shared/upstream/
    program: str  # the binary's name in the cache
    package: str  # what `go build` builds, relative to the folder
    # files upstream puts in place before building: destination <- source
    replacements: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    debian: tuple[str, ...] = ()  # Debian packages the build links against

    def source(self) -> Path:
        return upstream(self.name)

    def build_dir(self) -> Path | None:
        """The directory the current source builds into; None without Go or source."""
        go = go_version()
        if go is None or not self.source().is_dir():
            return None
        return cache_root() / f"{self.name}-{_digest(self.source(), go)}"

    def binary(self) -> Path | None:
        """The built program when it is there (it is moved in last), else None."""
        directory = self.build_dir()
        if directory is None:
            return None
        built = directory / "bin" / self.program
        return built if built.is_file() else None

    def missing(self) -> str | None:
        """Why this peer cannot run here, or None when it is built."""
        if go_version() is None:
            return f"no Go toolchain on PATH: {self.name} is built from its Go source"
        if not self.source().is_dir():
            return f"no {self.name} source at {self.source()}"
        if self.binary() is None:
            return f"{self.name} is not built (python -m tests.build peers)"
        return None


@cache
def _digest(folder: Path, go: str) -> str:
    """Of every file's path and bytes under ``folder``, the Go and the recipe."""
    digest = hashlib.sha256(f"{go}\nrecipe {RECIPE}\n".encode())
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    return user_cache(CACHE_VARIABLE, "peers")


# The Flux Operator as upstream ships it (Makefile build-container): the
# committed pkg/flux/keygen.go is a stub returning an empty CURVE key; the
# shipped operator has the cgo generator (libczmq's zcert_new) in its place.
FLUX_OPERATOR = Peer(
    name="flux-operator",
    program="flux-operator",
    package="main.go",
    replacements={"pkg/flux/keygen.go": "pkg/flux/keygen.go.template"},
    environment={
        "CGO_ENABLED": "1",
        "CGO_CFLAGS": "-I/usr/include",
        "CGO_LDFLAGS": "-L/usr/lib -lstdc++ -lczmq -lzmq",
    },
    debian=("libczmq-dev", "libzmq3-dev", "libsodium-dev"),
)

# DWS (DataWorkflowServices) as its Makefile builds the manager it ships: one
# static binary, run twice (--mode=controller, --mode=webhook).
DWS = Peer(name="dws", program="dws-manager", package="./cmd/")

PEERS = {peer.name: peer for peer in (FLUX_OPERATOR, DWS)}
