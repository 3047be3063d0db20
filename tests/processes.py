"""Helpers for tests that start processes and signal them."""

from __future__ import annotations

import signal


def default_signals() -> None:
    """``preexec_fn`` for a child a test will signal: a runner started in the
    background by a non-interactive shell ignores SIGINT, and a child would
    inherit that (Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
