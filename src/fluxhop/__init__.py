"""fluxhop: Flux Framework MiniClusters on Kubernetes, in one command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fluxhop.version import __version__

__all__ = ["Client", "__version__"]

if TYPE_CHECKING:
    from fluxhop.client import Client


def __getattr__(name: str) -> Any:
    # Imported on first use: `import fluxhop` stays cheap and client-free.
    if name == "Client":
        from fluxhop.client import Client

        return Client
    raise AttributeError(f"module 'fluxhop' has no attribute {name!r}")
