"""The rabbit front door's error."""

from __future__ import annotations

from fluxhop.errors import InputError

__all__ = ["RabbitError"]


class RabbitError(InputError):
    """A rabbit MPI request that cannot be honoured (one line, names the fix)."""
