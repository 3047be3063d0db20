"""fluxhop: Flux Framework MiniClusters on Kubernetes, in one command."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
