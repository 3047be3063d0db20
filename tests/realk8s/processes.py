"""The test cluster's processes: started in their own session, logged to a
file, stopped with SIGTERM and then SIGKILL, and recorded in a pid file so
that a later run can remove what a killed one left behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["Process", "die_with_parent", "kill_recorded"]

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when its parent dies, so that a test
    run killed outright does not leave a control plane running."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Process:
    def __init__(
        self, name: str, argv: list[str], workdir: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = argv
        self.log = workdir / "logs" / f"{name}.log"
        self.pidfile = workdir / "pids"
        self.env = env
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                env=self.env,
                preexec_fn=die_with_parent,
            )
        with open(self.pidfile, "a") as f:
            f.write(f"{self.popen.pid}\n")
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace: float = 10) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (its whole session)."""
        if self.popen is None or self.popen.returncode is not None:
            return  # never started, or already waited for (its pid may be another's now)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(grace)
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)  # and whatever it started in its session
            self.popen.wait()

    def kill(self) -> None:
        """SIGKILL the process alone (a crash: its children, if any, live on)."""
        if self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.kill()
            self.popen.wait()


def kill_recorded(pidfile: Path, markers: tuple[str, ...]) -> list[int]:
    """SIGKILL every recorded session that still exists and is still ours (its
    command line names one of ``markers``); returns their pids."""
    if not pidfile.exists():
        return []
    killed = []
    for line in pidfile.read_text().split():
        pid = int(line)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if not any(marker in cmdline for marker in markers):
            continue  # the number went to another process since
        try:
            os.killpg(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 10
    while killed and time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() for pid in killed):
            break
        time.sleep(0.05)
    return killed
