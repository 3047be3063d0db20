"""Where the project's own build of real Flux lives, and whether it is complete.

``python -m tests.realflux.build`` builds flux-core and flux-sched (Fluxion)
from the release tarballs in ``../shared/upstream/flux/`` into one prefix in
a cache outside the repository, named by a digest of what decides the build:
the tarballs' SHA-256 digests (from ``SHA256SUMS``, checked against the files
when building) and :data:`RECIPE`, bumped whenever the way they are built
changes. A new tarball or recipe is a new prefix; anything else finds the
build it already has.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

from tests.conformance import UPSTREAM_VARIABLE, upstream

__all__ = [
    "CACHE_VARIABLE",
    "FLUX_CORE",
    "FLUX_SCHED",
    "RECIPE",
    "UPSTREAM_VARIABLE",
    "Tarball",
    "built_prefix",
    "cache_root",
    "complete",
    "prefix_dir",
    "tarballs",
    "upstream_flux",
    "usr_complete",
    "usr_tree",
]

CACHE_VARIABLE = "FLUXHOP_FLUX_CACHE"
FLUX_CORE = "flux-core"
FLUX_SCHED = "flux-sched"
# The build recipe's version: part of the digest, so a changed recipe rebuilds.
RECIPE = "1"
# the file a finished build writes last (a killed build has none)
STAMP = ".fluxhop-built"


class Tarball:
    """One release tarball: ``name-version.tar.gz`` and its digest."""

    def __init__(self, path: Path, sha256: str) -> None:
        self.path = path
        self.sha256 = sha256
        stem = path.name.removesuffix(".tar.gz")
        self.project, _, self.version = stem.rpartition("-")

    def __repr__(self) -> str:
        return f"Tarball({self.path.name}, {self.sha256[:12]})"


def upstream_flux() -> Path:
    """``../shared/upstream/flux``."""
    return upstream("flux")


@cache
def tarballs() -> dict[str, Tarball] | None:
    """flux-core's and flux-sched's tarballs by project, or None when absent."""
    sums = upstream_flux() / "SHA256SUMS"
    if not sums.is_file():
        return None
    found: dict[str, Tarball] = {}
    for line in sums.read_text().splitlines():
        digest, _, name = line.strip().partition("  ")
        if name.endswith(".tar.gz"):
            tarball = Tarball(upstream_flux() / name, digest)
            found[tarball.project] = tarball
    if {FLUX_CORE, FLUX_SCHED} - found.keys():
        return None
    return {project: found[project] for project in (FLUX_CORE, FLUX_SCHED)}


def cache_root() -> Path:
    """``FLUXHOP_FLUX_CACHE``, else ``/opt/software`` for root, else
    ``~/.cache/fluxhop/flux``. The prefix is compiled into the build, so it
    is where the build must stay. As root it is laid out as a Spack install
    tree (``/opt/software/flux-core-...-<digest>``): the Flux view images of
    the real nodes (tests/realk8s/images) carry it at the same path, as the
    Flux Operator's view images carry their Spack tree, and a view's links
    into it resolve in any container that has /opt/software. Not root's
    home: the pods of the e2e tier run the build, and give every container
    an empty /root of its own, as an image would."""
    named = os.environ.get(CACHE_VARIABLE)
    if named:
        return Path(named)
    if os.geteuid() == 0:
        return Path("/opt/software")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fluxhop" / "flux"


def prefix_dir() -> Path | None:
    """The prefix the current tarballs build into, or None without them."""
    sources = tarballs()
    if sources is None:
        return None
    digest = hashlib.sha256(f"recipe {RECIPE}\n".encode())
    for tarball in sources.values():
        digest.update(f"{tarball.path.name} {tarball.sha256}\n".encode())
    versions = "-".join(f"{t.project}-{t.version}" for t in sources.values())
    return cache_root() / f"{versions}-{digest.hexdigest()[:12]}"


def complete(prefix: Path) -> bool:
    return (prefix / STAMP).is_file() and (prefix / "bin" / "flux").is_file()


def usr_tree(prefix: Path) -> Path:
    """The same Flux installed for /usr, beside the prefix: a root of
    ``usr/``, ``etc/`` and ``var/`` that an image with Flux installed
    carries, as upstream's ``fluxrm/flux-sched`` images have it (the Flux
    Operator, its view disabled, mounts an emptyDir over /opt/software, so
    the prefix cannot be there)."""
    return prefix.with_name(f"{prefix.name}-in-usr")


def usr_complete(prefix: Path) -> bool:
    tree = usr_tree(prefix)
    return (tree / STAMP).is_file() and (tree / "usr" / "bin" / "flux").is_file()


def built_prefix() -> Path | None:
    """The project's build of Flux when it is there and complete, else None."""
    prefix = prefix_dir()
    return prefix if prefix is not None and complete(prefix) else None
