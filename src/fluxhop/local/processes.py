"""Sessions and ports of local brokers: whether a broker's session still
runs, ending sessions, free loopback ports. Each broker starts a session of
its own (its pid is the session's id and its own group's)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from fluxhop.render.localhost import LOOPBACK

__all__ = [
    "POLL",
    "STOP_GRACE",
    "free_ports",
    "gone",
    "interrupts_held",
    "session_alive",
    "signal_session",
    "started_after",
    "stop_sessions",
]

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


def _members(sid: int) -> list[tuple[int, int, str]]:
    """(pid, process group, state) of each process of session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces, so split after ')'
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 3 and fields[3] == str(sid):
            found.append((int(entry.name), int(fields[2]), fields[0]))
    return found


def session_alive(sid: int) -> bool:
    """Whether a process of a broker's session still runs. The session, not
    the process group: Flux starts its rc scripts and job shells in groups of
    their own, which a broker killed mid-start leaves behind. A zombie does
    not count: a detached broker's parent may be gone or not reaping."""
    try:
        os.killpg(sid, 0)
        leader = True
    except ProcessLookupError:
        leader = False  # the broker's own group is gone; others of its session may not be
    except PermissionError:
        return True
    if not Path("/proc").is_dir():
        return leader
    return any(state != "Z" for _, _, state in _members(sid))


def started_after(pid: int, moment: float) -> bool:
    """Whether process ``pid`` started after ``moment`` (epoch seconds): its
    number was given again to a process that is not the broker it was."""
    try:
        ticks = int((Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return False  # gone, or no /proc: nothing to tell it by
    return boot + ticks / os.sysconf("SC_CLK_TCK") > moment + 1.0  # btime is whole seconds


def signal_session(sid: int, sig: int) -> None:
    """``sig`` to every process group of a broker's session (its own first)."""
    groups = [sid, *sorted({group for _, group, _ in _members(sid)} - {sid})]
    for group in groups:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)


def stop_sessions(sids: list[int], started_by: float | None = None) -> None:
    """End brokers' sessions this process did not start (a detached
    instance): TERM, up to STOP_GRACE seconds for them to go, then KILL.
    With ``started_by`` (when the brokers had all started), a session whose
    leader started later is someone else's, its number reused: left alone.
    (A session's number is not reused while a process of it lives.)"""
    if started_by is not None:
        sids = [sid for sid in sids if not started_after(sid, started_by)]
    for sid in sids:
        signal_session(sid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while any(session_alive(s) for s in sids) and time.monotonic() < deadline:
        time.sleep(POLL)
    gone(sids)


def gone(sids: list[int]) -> None:
    """KILL to the sessions until they are gone, a few seconds at most: a
    killed process is not gone at once, and a job shell may have started a
    group of its own since the last signal."""
    deadline = time.monotonic() + STOP_GRACE
    while True:
        alive = [s for s in sids if session_alive(s)]
        if not alive or time.monotonic() >= deadline:
            return
        for sid in alive:
            signal_session(sid, signal.SIGKILL)
        time.sleep(POLL)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back while a broker is started and recorded,
    then raised: an interrupt between the fork and the record would leave a
    broker that no cleanup knows. (A child's exec resets the handler.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda sig, _: held.append(sig)) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:  # one: the first raised would stop the second; SIGTERM's status wins
            signal.raise_signal(signal.SIGTERM if signal.SIGTERM in held else signal.SIGINT)
