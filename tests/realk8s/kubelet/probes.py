"""Exec readiness probes, as the kubelet's prober runs them.

One thread per probed container, started when the container starts: after
``initialDelaySeconds``, every ``periodSeconds`` it runs the probe's command
inside the container (its namespaces, environment, user and working
directory, entered with nsenter as the node's exec does), gives it
``timeoutSeconds``, and turns ``successThreshold`` passes in a row into
ready and ``failureThreshold`` failures in a row into not ready. A
container that restarts starts not ready. Readiness never restarts a
container. Only ``exec`` probes are run (fluxhop renders no other kind);
liveness and startup probes are not run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ReadinessProber", "exec_argv"]


def exec_argv(pid: int, spec: dict[str, Any], command: list[str]) -> list[str]:
    """``command`` inside the container whose process is host ``pid``, with
    the container's environment, user and working directory (``spec``: the
    container's sandbox spec)."""
    argv = ["nsenter", "--target", str(pid), "--mount", "--uts", "--ipc", "--net", "--pid"]
    if spec.get("cwd"):
        argv.append(f"--wd={spec['cwd']}")
    if spec.get("gid") is not None:
        argv += ["--setgid", str(spec["gid"])]
    if spec.get("uid") is not None:
        argv += ["--setuid", str(spec["uid"])]
    env = [f"{k}={v}" for k, v in spec["env"].items()]
    return [*argv, "--", "/usr/bin/env", "-i", "--", *env, *command]


def _passes(argv: list[str], timeout: float) -> bool:
    """The probe's verdict: exit 0 within the timeout (its whole process
    group is killed past it, as the runtime ends a timed-out exec)."""
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        return process.wait(timeout) == 0
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False


class ReadinessProber(threading.Thread):
    """The readiness of one container. ``target()`` gives the host PID of
    the running container (None once it is not running); ``report(ready)``
    is called when the verdict changes; ``stopped`` ends the prober."""

    def __init__(
        self,
        name: str,
        probe: dict[str, Any],
        spec: dict[str, Any],
        target: Callable[[], int | None],
        report: Callable[[bool], None],
        stopped: threading.Event,
    ) -> None:
        super().__init__(name=f"readiness {name}", daemon=True)
        self.command: list[str] = probe["exec"]["command"]
        self.delay = float(probe.get("initialDelaySeconds", 0))
        self.period = float(probe.get("periodSeconds", 10))
        self.timeout = float(probe.get("timeoutSeconds", 1))
        self.successes_needed = int(probe.get("successThreshold", 1))
        self.failures_needed = int(probe.get("failureThreshold", 3))
        self.spec = spec
        self.target = target
        self.report = report
        self.stopped = stopped
        self.ready = False

    def restarted(self) -> None:
        """The container started again: not ready until its probe says so."""
        if self.ready:
            self.ready = False
            self.report(False)

    def run(self) -> None:
        if self.stopped.wait(self.delay):
            return
        passes = failures = 0
        while not self.stopped.is_set():
            pid = self.target()
            ok = pid is not None and _passes(exec_argv(pid, self.spec, self.command), self.timeout)
            passes, failures = (passes + 1, 0) if ok else (0, failures + 1)
            if not self.ready and passes >= self.successes_needed:
                self.ready = True
                self.report(True)
            elif self.ready and failures >= self.failures_needed:
                self.ready = False
                self.report(False)
            self.stopped.wait(self.period)
