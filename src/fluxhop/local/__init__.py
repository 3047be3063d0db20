"""The local backend: a MiniCluster as N real Flux brokers on this machine."""

from __future__ import annotations

from fluxhop.local.instance import LocalInstance

__all__ = ["LocalInstance"]
