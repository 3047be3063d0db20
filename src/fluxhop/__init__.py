"""fluxhop: Flux Framework MiniClusters on Kubernetes, in one command."""

from __future__ import annotations

from fluxhop.version import __version__

__all__ = ["Client", "__version__"]

# Not typing.TYPE_CHECKING: importing typing here would run before the CLI's
# Ctrl-C guard (fluxhop.cli), and `import fluxhop` should cost nothing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from fluxhop.client import Client


def __getattr__(name: str) -> object:
    # Imported on first use: `import fluxhop` stays cheap and client-free.
    if name == "Client":
        from fluxhop.client import Client

        return Client
    raise AttributeError(f"module 'fluxhop' has no attribute {name!r}")
