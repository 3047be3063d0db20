"""Finding a real flux-core for the tests that need one.

The tests never build or fetch Flux; they find an installed one: the prefix
in ``FLUXHOP_FLUX_PREFIX`` (``$prefix/bin/flux``), else the project's own
build of flux-core and Fluxion (``python -m tests.realflux.build``, run by the
README's build step), else a ``flux`` on PATH. Where there is none, those
tests skip and say so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from tests.realflux.install import built_prefix

__all__ = ["MIN_VERSION", "flux_prefix", "flux_version", "missing_flux", "missing_fluxion"]

MIN_VERSION = (0, 82, 0)  # -Shostname=, which the local backend needs
PREFIX_VARIABLE = "FLUXHOP_FLUX_PREFIX"


@cache
def flux_prefix() -> Path | None:
    """The install prefix of the flux-core to test against, or None."""
    named = os.environ.get(PREFIX_VARIABLE)
    if named:
        prefix = Path(named)
        return prefix if (prefix / "bin" / "flux").is_file() else None
    built = built_prefix()
    if built is not None:
        return built
    found = shutil.which("flux")
    return Path(found).resolve().parent.parent if found else None


@cache
def flux_version() -> tuple[int, ...] | None:
    prefix = flux_prefix()
    if prefix is None:
        return None
    out = subprocess.run(
        [str(prefix / "bin" / "flux"), "version"], capture_output=True, text=True, timeout=60
    ).stdout
    match = re.search(r"commands:\s+(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(part) for part in match.groups()) if match else None


def missing_flux() -> str | None:
    """Why a real Flux cannot be used here, or None when it can."""
    if flux_prefix() is None:
        if os.environ.get(PREFIX_VARIABLE):
            return f"{PREFIX_VARIABLE}={os.environ[PREFIX_VARIABLE]} has no bin/flux"
        return (
            "no flux-core: build it (python -m tests.realflux.build), put flux on PATH "
            f"or set {PREFIX_VARIABLE} to its install prefix"
        )
    version = flux_version()
    if version is None or version < MIN_VERSION:
        found = ".".join(map(str, version)) if version else "an unknown version"
        return f"flux-core {found} is older than {'.'.join(map(str, MIN_VERSION))}"
    return None


def missing_fluxion() -> str | None:
    """Why the flux-core found does not load Fluxion (flux-sched), or None.

    Installed in flux-core's prefix, as the project's build does, Fluxion's
    modprobe entries make every instance load it instead of sched-simple."""
    reason = missing_flux()
    if reason:
        return reason
    prefix = flux_prefix()
    assert prefix is not None
    if not (prefix / "lib" / "flux" / "modules" / "sched-fluxion-qmanager.so").is_file():
        return f"Fluxion (flux-sched) is not installed with the flux-core at {prefix}"
    return None
