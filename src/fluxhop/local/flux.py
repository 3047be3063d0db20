"""The ``flux`` on PATH, and whether it can run a local MiniCluster."""

from __future__ import annotations

import re
import shutil
import subprocess

from fluxhop.errors import FluxTooOld, LocalError, LocalToolMissing

__all__ = ["MIN_VERSION", "check_version", "find_flux", "flux_version"]

MIN_VERSION = (0, 82)  # -Shostname= (FLUX_FAKE_HOSTNAME before, removed in 0.82)
_VERSION = re.compile(r"^commands:\s*v?(\d+)\.(\d+)(?:\.(\d+))?", re.MULTILINE)


def find_flux(flux: str | None = None) -> str:
    path = shutil.which(flux or "flux")
    if path is None:
        raise LocalToolMissing(
            "flux is not on PATH: install flux-core 0.82 or newer (spack install flux-sched, "
            "or your distribution's flux-core package), or run on Kubernetes without --local"
        )
    return path


def flux_version(flux: str) -> tuple[int, int, int]:
    try:
        done = subprocess.run([flux, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LocalError(f"cannot run {flux} version: {err}") from None
    match = _VERSION.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise LocalError(f"cannot tell the flux-core version from '{flux} version'")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def check_version(flux: str) -> tuple[int, int, int]:
    version = flux_version(flux)
    if version[:2] < MIN_VERSION:
        have = ".".join(map(str, version))
        raise FluxTooOld(
            f"flux-core {have} at {flux} is too old for --local: it needs 0.82 or newer "
            "(the broker's -Shostname= override); upgrade flux-core"
        )
    return version
