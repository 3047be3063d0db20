"""Process groups and ports of local brokers: whether a group still runs,
ending groups this process did not start, free loopback ports."""

from __future__ import annotations

import os
import signal
import socket
import time
from contextlib import suppress
from pathlib import Path

from fluxhop.render.localhost import LOOPBACK

__all__ = ["POLL", "STOP_GRACE", "free_ports", "group_alive", "stop_groups"]

STOP_GRACE = 5.0  # seconds between TERM and KILL
POLL = 0.05


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on the loopback interface right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. A zombie does not count:
    a detached broker's parent may be gone or not reaping, and kill(0) would
    still find it."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def stop_groups(pgids: list[int]) -> None:
    """End process groups this process did not start (a detached instance):
    TERM, up to STOP_GRACE seconds for them to go, then KILL."""
    for pgid in pgids:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while any(group_alive(p) for p in pgids) and time.monotonic() < deadline:
        time.sleep(POLL)
    for pgid in pgids:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
