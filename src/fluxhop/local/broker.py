"""One local broker's process and what it prints: rank 0's output to a sink
(and kept for logs()), every rank's last lines kept for a failure message,
the brokers' chatter hidden unless asked for (as flux start does)."""

from __future__ import annotations

import re
import subprocess
import threading
from collections import deque
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import IO, Protocol

__all__ = ["TAIL_LINES", "Broker", "Sink", "chatter"]

TAIL_LINES = 20

# The brokers' notice/info/debug lines (syslog levels 5-7) and the
# entrypoint's progress lines: shown only when verbose, as flux start does.
_CHATTER = re.compile(r"<[5-7]>|fluxhop: (?!error:)")


def chatter(line: str) -> bool:
    """A log line a quiet run does not show (it still goes to the failure tail)."""
    return _CHATTER.match(line) is not None


class Sink(Protocol):
    """Where rank 0's output goes (a text stream)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class Broker:
    """One rank's process and the tail of what it printed."""

    def __init__(self, rank: int, process: subprocess.Popen[str]) -> None:
        self.rank = rank
        self.process = process
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.threads: list[threading.Thread] = []
        self.log: Path | None = None  # a detached broker's log file

    def pump(
        self,
        stream: IO[str] | None,
        sink: Sink | None,
        lines: deque[str] | None,
        *,
        strip: bool = True,
        hide: Callable[[str], bool] | None = None,
    ) -> None:
        def copy() -> None:
            assert stream is not None
            with closing(stream):
                for line in stream:
                    if sink is not None and not (hide and hide(line)):
                        sink.write(line)
                        sink.flush()
                    if lines is not None:
                        lines.append(line.rstrip("\n") if strip else line)

        thread = threading.Thread(target=copy, name=f"fluxhop-rank{self.rank}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def finish_output(self, timeout: float = 5.0) -> None:
        for thread in self.threads:
            thread.join(timeout)
