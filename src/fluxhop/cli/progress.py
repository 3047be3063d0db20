"""A progress line on stderr while a MiniCluster comes up (stdout stays the
job's output). On a terminal it redraws one line with rich; elsewhere it
prints a line each time the summary changes."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from fluxhop.workload import Progress

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    def __init__(self, name: str, *, quiet: bool = False) -> None:
        self.name = name
        self.quiet = quiet
        self.console = Console(stderr=True)
        self.last = ""
        self.live: Live | None = None
        if not quiet and self.console.is_terminal:
            self.live = Live(Text(f"{name}: creating"), console=self.console, transient=True)
            self.live.start()

    def update(self, progress: Progress) -> None:
        summary = f"{self.name}: {progress.summary()}"
        if summary == self.last or self.quiet:
            return
        self.last = summary
        if self.live is not None:
            self.live.update(Text(summary))
        else:
            print(f"fluxhop: {summary}", file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        if not self.quiet:
            self.stop()
            print(f"fluxhop: {message}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
