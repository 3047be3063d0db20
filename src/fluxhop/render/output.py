"""Rendered objects as YAML or JSON text: stable, readable, no YAML aliases.

Multi-line strings (the pod scripts, broker.toml) are written as literal
blocks so that ``fluxhop render`` output reads like hand-written YAML.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import yaml

from fluxhop.documents import go_reads_as_string
from fluxhop.render.pod import VIEW_IMAGE_VOLUME
from fluxhop.spec.fluxsettings import DEFAULT_VIEW_IMAGE
from fluxhop.spec.views import view_os

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
    items = list(objects)
    text = yaml.dump_all(items, Dumper=_Dumper, sort_keys=False, width=100, explicit_start=True)
    return view_note(items) + text


def _view_images(node: Any) -> Iterator[tuple[str, str]]:
    """The Flux view images the objects carry, and how the pods get them:
    the view image volume's (mounted), the flux-view init container's
    (copied), or the Flux Operator's spec.flux.container (its default when
    unset; it copies)."""
    if isinstance(node, dict):
        if node.get("kind") == "MiniCluster":
            view = (node.get("spec") or {}).get("flux", {}).get("container") or {}
            if not view.get("disable"):
                yield view.get("image") or DEFAULT_VIEW_IMAGE, "copied by the Flux Operator"
            return
        image = node.get("image")
        if node.get("name") == VIEW_IMAGE_VOLUME and isinstance(image, dict):
            yield str(image.get("reference")), "mounted from its image"
        if node.get("name") == "flux-view" and isinstance(image, str):
            yield image, "copied by an init container"
        for value in node.values():
            yield from _view_images(value)
    elif isinstance(node, list):
        for item in node:
            yield from _view_images(item)


def view_note(objects: list[dict[str, Any]]) -> str:
    """A comment naming the Flux view image, how the pods get it (mounted
    or copied: spec.flux.container.volume) and the OS it needs of the
    application image (nothing when the image has Flux itself)."""
    lines = []
    for image, how in dict.fromkeys(_view_images(objects)):
        os = view_os(image)
        needs = (
            f"{os}: the application image must be {os.name.split()[0]} with glibc "
            f"{os.glibc[0]}.{os.glibc[1]} or newer"
            if os and os.glibc
            else "not a known view image: its OS and glibc must match the application image"
        )
        lines.append(
            f"# Flux view {image}: {needs} (another: --view-image or spec.flux.container.image)\n"
            f"# It is {how} (--view-volume or spec.flux.container.volume: image, copy or auto)\n"
        )
    return "".join(lines)


def dump_json(objects: Iterable[dict[str, Any]]) -> str:
    items = list(objects)
    document: Any = (
        items[0] if len(items) == 1 else {"apiVersion": "v1", "kind": "List", "items": items}
    )
    return json.dumps(document, indent=2) + "\n"
