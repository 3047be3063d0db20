"""Comparing two JobSets field by field: the one Kubeflow Trainer's flux
plugin builds for a TrainJob and the one ``fluxhop trainer render`` builds.

Both are read back through the API server (fluxhop's by a server-side dry
run), so that defaults are filled in alike, and flattened to
``path -> value``; list items that have a name are keyed by it
(``containers[node]``), so that a difference names the field it is in, and
volume mounts by their path (one volume may be mounted at two paths).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["differences", "flatten", "table_rows"]

# What is the server's or the owner's, not the builder's.
IGNORED = (
    "metadata.uid",
    "metadata.resourceVersion",
    "metadata.creationTimestamp",
    "metadata.generation",
    "metadata.managedFields",
    "metadata.ownerReferences",
    "status",
)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else key))
    elif (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "name" in v for v in value)
    ):
        for item in value:
            key = item.get("mountPath", item["name"])
            out.update(flatten(item, f"{prefix}[{key}]"))
    elif isinstance(value, list):
        out[prefix] = json.dumps(value, sort_keys=True)
    else:
        out[prefix] = value
    return out


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """path -> (theirs, ours) for every leaf that differs (None: absent)."""
    a, b = flatten(theirs), flatten(ours)
    out = {}
    for path in sorted(set(a) | set(b)):
        if any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in IGNORED):
            continue
        if a.get(path) != b.get(path):
            out[path] = (a.get(path), b.get(path))
    return out


ROW = re.compile(r"^\| `([^`]+)` \| (intended fix|gap) \| (.+) \|$")


def table_rows(guide: Path) -> dict[str, tuple[str, str]]:
    """The side-by-side table of the Trainer guide: path pattern -> (verdict, why).
    A pattern matches a path it equals or that it is a prefix of (a field)."""
    return {m.group(1): (m.group(2), m.group(3)) for line in guide.read_text().splitlines()
            if (m := ROW.match(line.strip()))}  # fmt: skip


def covered(path: str, patterns: list[str]) -> str | None:
    """The table row that explains ``path``, or None."""
    for pattern in sorted(patterns, key=len, reverse=True):
        if path == pattern or path.startswith(pattern + ".") or path.startswith(pattern + "["):
            return pattern
    return None
