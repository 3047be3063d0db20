"""Rendered objects as YAML or JSON text: stable, readable, no YAML aliases.

Multi-line strings (the pod scripts, broker.toml) are written as literal
blocks so that ``fluxhop render`` output reads like hand-written YAML.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml

from fluxhop.documents import go_reads_as_string

__all__ = ["dump_json", "dump_yaml"]


# libyaml's emitter where PyYAML has it (its wheels do): the same documents,
# nine times faster than the pure-Python emitter, a twentieth of `fluxhop
# render`'s time. It folds long double-quoted lines at other places.
_Base: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(ch in value for ch in "\t\r") and value == value.rstrip(" "):
        lines = value.split("\n")
        if all(line == line.rstrip(" ") for line in lines):
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    if not go_reads_as_string(value):
        # PyYAML writes y, n, 1e3 or 0o17 plain (YAML 1.1 as PyYAML reads it), but
        # kubectl's go-yaml reads them as a bool or a number: `fluxhop render |
        # kubectl apply -f -` would fail on an env value or an argv word
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump_yaml(objects: Iterable[dict[str, Any]]) -> str:
    return yaml.dump_all(
        list(objects), Dumper=_Dumper, sort_keys=False, width=100, explicit_start=True
    )


def dump_json(objects: Iterable[dict[str, Any]]) -> str:
    items = list(objects)
    document: Any = (
        items[0] if len(items) == 1 else {"apiVersion": "v1", "kind": "List", "items": items}
    )
    return json.dumps(document, indent=2) + "\n"
