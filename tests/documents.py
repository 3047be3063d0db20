"""MiniCluster documents for tests: the v1alpha2 envelope around a spec."""

from __future__ import annotations

from typing import Any


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
