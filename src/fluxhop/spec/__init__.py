"""The MiniCluster model: one typed spec that every front door produces and
every renderer consumes."""

from __future__ import annotations

from fluxhop.spec.minicluster import (
    API_VERSION,
    DEFAULT_VIEW_IMAGE,
    Container,
    MiniCluster,
    MiniClusterSpec,
)

__all__ = ["API_VERSION", "DEFAULT_VIEW_IMAGE", "Container", "MiniCluster", "MiniClusterSpec"]
