"""The rabbit front door's error."""

from __future__ import annotations

from fluxhop.errors import InputError, clipped

__all__ = ["RabbitError"]


class RabbitError(InputError):
    """A rabbit MPI request that cannot be honoured (one line, names the fix).

    The line is cut short when it quotes a huge value (a jobspec's attributes
    are the job's user's, and reach the job's exception whole)."""

    def __init__(self, message: str) -> None:
        super().__init__(clipped(" ".join(str(message).split())))
