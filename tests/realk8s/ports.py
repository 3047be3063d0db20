"""A free TCP port on 127.0.0.1, for the test clusters' components."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
