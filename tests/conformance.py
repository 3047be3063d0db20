"""Where the upstream conformance data lives (``../shared/conformance``).

Tests read it in place; a missing directory is an error, never a silent skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _conformance_dir() -> Path:
    override = os.environ.get("FLUXHOP_CONFORMANCE")
    path = Path(override) if override else REPO.parent / "shared" / "conformance"
    if not (path / "MANIFEST.md").is_file():
        raise RuntimeError(
            f"conformance data not found at {path}; set FLUXHOP_CONFORMANCE to the "
            "shared/conformance directory"
        )
    return path


CONFORMANCE = _conformance_dir()
UPSTREAM_VARIABLE = "FLUXHOP_UPSTREAM"


def upstream(name: str) -> Path:
    """``../shared/upstream/<name>``: a peer's source to build, never to copy
    (``FLUXHOP_UPSTREAM`` names another upstream/)."""
    named = os.environ.get(UPSTREAM_VARIABLE)
    return (Path(named) if named else REPO.parent / "shared" / "upstream") / name


def load_vectors(relative: str) -> list[dict[str, Any]]:
    """The JSON vector file ``relative`` under the conformance directory."""
    return json.loads((CONFORMANCE / relative).read_text())


def by_op(vectors: list[dict[str, Any]], key: str = "op") -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for vector in vectors:
        grouped.setdefault(vector[key], []).append(vector)
    return grouped
