"""Debian packages the builds and tests need: which are missing, and
installing them with apt-get where this runs as root. Where it cannot, the
error is one line naming the packages and the command that installs them."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

__all__ = ["PackagesError", "install", "missing"]


class PackagesError(Exception):
    """Packages are missing and cannot be installed here (one line)."""


def missing(packages: Sequence[str]) -> list[str]:
    """The packages of ``packages`` not installed (none off Debian: there the
    build's own configure step names what it lacks)."""
    if shutil.which("dpkg-query") is None:
        return []
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
        capture_output=True,
        text=True,
    )
    installed = {
        line.split()[0] for line in done.stdout.splitlines() if line.endswith(" installed")
    }
    return [name for name in packages if name not in installed]


def install(packages: Sequence[str], purpose: str) -> list[str]:
    """Install what is missing of ``packages``; the names installed."""
    needed = missing(packages)
    if not needed:
        return []
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise PackagesError(
            f"{purpose} needs these Debian packages; install them as root: "
            f"apt-get install -y {' '.join(needed)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-q", "-y", "-o", "Dpkg::Use-Pty=0"]
    done = None
    for attempt in ("install", "update"):
        if attempt == "update":  # a fresh machine may have no package lists yet
            subprocess.run([*apt, "update"], env=env, capture_output=True)
        done = subprocess.run(
            [*apt, "install", "--no-install-recommends", *needed],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return needed
    assert done is not None
    last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
    raise PackagesError(f"apt-get install {' '.join(needed)} failed: {last}")
