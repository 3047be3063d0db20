"""A simulated cluster for the real-Flux tests: ``../shared/tools/podsim.py``
runs each pod of a rendered Job or JobSet as real processes in its own network
namespace (eth0, host name, /etc/hosts, kubelet-style volumes), with the
flux-core that was found standing in for an image that contains Flux.

This module only drives podsim: it writes the manifests, starts podsim, reads
what it prints, and finds a pod's processes to signal or to enter.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conformance import CONFORMANCE
from tests.processes import default_signals

PODSIM = Path(os.environ.get("FLUXHOP_PODSIM", CONFORMANCE.parent / "tools" / "podsim.py"))
LOGS = Path("/tmp/podsim")
_RESULT = re.compile(r"^(?P<pod>\S+)\s+(?P<ip>\d+\.\d+\.\d+\.\d+)\s+(?P<phase>\w+)\s*(?P<rest>.*)$")
# What podsim does not simulate and a test must leave out: NetworkPolicy is not enforced.
NOT_SIMULATED = {"NetworkPolicy"}


@dataclass
class Finished:
    """What a podsim run ended with."""

    code: int  # 0 Complete, 1 Failed, 2 timeout or setup error, 130 interrupted
    stdout: str
    stderr: str
    lead: str  # index 0's host name

    def lead_lines(self) -> list[str]:
        """Index 0's output, as podsim printed it live, without podsim's and
        the brokers' own log lines."""
        prefix = f"[{self.lead}] "
        lines = [
            line[len(prefix) :] for line in self.stdout.splitlines() if line.startswith(prefix)
        ]
        return [
            line
            for line in lines
            if not line.startswith(("podsim[", "fluxhop:")) and not re.match(r"<\d>", line)
        ]

    def results(self) -> dict[str, tuple[str, str]]:
        """Pod name -> (phase, container results such as ``e2e=3``)."""
        out = {}
        for line in self.stdout.splitlines():
            match = _RESULT.match(line)
            if match:
                out[match["pod"]] = (match["phase"], match["rest"])
        return out

    def explain(self) -> str:
        return f"podsim exited {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


@dataclass
class Cluster:
    """One podsim run of ``objects`` (the rendered manifests)."""

    objects: list[dict[str, Any]]
    workdir: Path
    flux_prefix: Path
    timeout: float = 120
    process: subprocess.Popen[str] | None = field(default=None, init=False)

    @property
    def lead(self) -> str:
        workload = next(o for o in self.objects if o["kind"] in ("Job", "JobSet"))
        name = workload["metadata"]["name"]
        return f"{name}-0" if workload["kind"] == "Job" else f"{name}-node-0-0"

    def _manifests(self) -> Path:
        path = self.workdir / "manifests.yaml"
        kept = [o for o in self.objects if o["kind"] not in NOT_SIMULATED]
        path.write_text(yaml.safe_dump_all(kept))
        return path

    def _argv(self) -> list[str]:
        return [
            sys.executable,
            str(PODSIM),
            "--flux-prefix",
            str(self.flux_prefix),
            "--timeout",
            str(int(self.timeout)),
            str(self._manifests()),
        ]

    def run(self) -> Finished:
        done = subprocess.run(
            self._argv(), capture_output=True, text=True, timeout=self.timeout + 60
        )
        return Finished(done.returncode, done.stdout, done.stderr, self.lead)

    def start(self) -> Cluster:
        self.process = subprocess.Popen(
            self._argv(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_signals,  # stop() interrupts it with SIGINT
        )
        return self

    def wait(self) -> Finished:
        assert self.process is not None
        stdout, stderr = self.process.communicate(timeout=self.timeout + 60)
        return Finished(self.process.returncode, stdout, stderr, self.lead)

    def stop(self) -> None:
        """Interrupt podsim (it cleans up after itself on SIGINT)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate()

    # --- inside a running pod -------------------------------------------------
    def log(self, host: str) -> str:
        path = LOGS / f"{host}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_until(self, what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
        """Wait for an event (a log line, a file, a process), never for a guess."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"podsim ended before {what}:\n{self.wait().explain()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    @staticmethod
    def processes(pod_index: int) -> Iterable[tuple[int, str, list[str]]]:
        """(pid, comm, argv) of every process in pod ``pod_index``'s network namespace."""
        listed = subprocess.run(
            ["ip", "netns", "pids", f"fhsim-{pod_index}"], capture_output=True, text=True
        ).stdout.split()
        for pid in map(int, listed):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue  # it ended meanwhile
            yield pid, comm, [a.decode(errors="replace") for a in argv if a]

    def entrypoint_pid(self, pod_index: int) -> int | None:
        """The pod's Flux container: the bash that runs the entrypoint."""
        for pid, comm, argv in self.processes(pod_index):
            if comm == "bash" and any(a.endswith("entrypoint.sh") for a in argv):
                return pid
        return None

    def broker_pids(self, pod_index: int) -> list[int]:
        return [pid for pid, comm, _ in self.processes(pod_index) if comm.startswith("flux-broker")]

    def exec(
        self, pod_index: int, argv: list[str], timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """``kubectl exec`` into the pod's Flux container."""
        pid = self.wait_until(
            f"pod {pod_index}'s container", lambda: self.entrypoint_pid(pod_index)
        )
        return subprocess.run(
            ["nsenter", "-a", "-t", str(pid), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
