"""MiniCluster documents for tests: the v1alpha2 envelope around a spec."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def mappings(tree: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in a tree of dicts and lists, the root first."""
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from mappings(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from mappings(value)


def minicluster_doc(name: str = "demo", namespace: str | None = None, **spec: Any) -> dict:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": metadata,
        "spec": spec,
    }
