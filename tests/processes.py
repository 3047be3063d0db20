"""Helpers for tests that start processes, signal them and wait on them."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any


def default_signals() -> None:
    """``preexec_fn`` for a child a test will signal: a runner started in the
    background by a non-interactive shell ignores SIGINT, and a child would
    inherit that (Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def eventually(
    what: str,
    check: Callable[[], Any],
    timeout: float = 60,
    every: float = 0.1,
    tolerate: tuple[type[BaseException], ...] = (),
) -> Any:
    """Poll an observable condition until it holds and return its value; fail
    with ``what`` after ``timeout``. Errors of the ``tolerate`` kinds count as
    "not yet" (a server still starting)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except tolerate as error:
            last = error
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
