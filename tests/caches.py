"""Where the builds the tests run on are cached: outside the repository,
under the user's cache directory unless a variable names another."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache"]


def user_cache(variable: str, name: str) -> Path:
    """``$variable`` when set, else ``$XDG_CACHE_HOME/fluxhop/<name>``
    (``~/.cache/fluxhop/<name>``)."""
    named = os.environ.get(variable)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fluxhop" / name
