"""One MiniCluster run as N broker processes on this machine.

Every rank runs the same generated ``entrypoint.sh`` a pod runs, told its
rank, host name and directories through the entrypoint's environment
overrides. fluxhop owns the processes: each starts in its own session, so a
Ctrl-C in the terminal reaches fluxhop only, and :meth:`LocalInstance.stop`
ends every broker (TERM, then KILL) and removes the run directory, whatever
happened before.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import closing, suppress
from pathlib import Path
from typing import IO, Protocol

from fluxhop.errors import BrokerFailed, JoinTimeout, LocalError, PortConflict, WaitTimeout
from fluxhop.flux.curve import CurveCert
from fluxhop.local.flux import check_version, find_flux
from fluxhop.render.localhost import LOOPBACK, LocalLayout, local_bundle
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["LocalInstance", "free_ports"]

TAIL_LINES = 20
SHOWN_LINES = 8
STOP_GRACE = 5.0  # seconds between TERM and KILL
WORKER_GRACE = 10.0  # seconds workers get to leave after rank 0 is done
POLL = 0.05
INHERITED = ("FLUX_URI", "FLUX_JOB_", "FLUX_TASK_", "FLUX_KVS_NAMESPACE", "PMI_", "PMIX_")
# The brokers' notice/info/debug lines (syslog levels 5-7) and the
# entrypoint's progress lines: shown only when verbose, as flux start does.
_CHATTER = re.compile(r"<[5-7]>|fluxhop: (?!error:)")


def chatter(line: str) -> bool:
    """A log line a quiet run does not show (it still goes to the failure tail)."""
    return _CHATTER.match(line) is not None


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


class Sink(Protocol):
    """Where rank 0's output goes (a text stream)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Broker:
    """One rank's process and the tail of what it printed."""

    def __init__(self, rank: int, process: subprocess.Popen[str]) -> None:
        self.rank = rank
        self.process = process
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.threads: list[threading.Thread] = []

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


class LocalInstance:
    """A MiniCluster as ``size`` brokers on 127.0.0.1.

    >>> with LocalInstance(spec) as instance:   # doctest: +SKIP
    ...     code = instance.run()
    """

    def __init__(
        self,
        spec: MiniCluster,
        *,
        flux: str | None = None,
        workdir: str | None = None,
        join_timeout: float = 60.0,
        stdout: Sink | None = None,
        stderr: Sink | None = None,
        verbose: bool = False,
    ) -> None:
        """``verbose`` passes the brokers' info lines on to ``stderr``; by
        default only warnings and errors are shown, as with ``flux start``."""
        self.spec = spec
        self.verbose = verbose
        self.flux_arg = flux
        self.workdir = workdir
        self.join_timeout = join_timeout
        self.stdout: Sink = stdout if stdout is not None else sys.stdout
        self.stderr: Sink = stderr if stderr is not None else sys.stderr
        self.root: Path | None = None
        self.layout: LocalLayout | None = None
        self.brokers: list[_Broker] = []
        self.ports: list[int] = []
        self.output: deque[str] = deque(maxlen=10_000)  # rank 0's stdout, for logs()
        self.started: float | None = None
        self.exit_code: int | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def size(self) -> int:
        return self.spec.spec.size

    @property
    def interactive(self) -> bool:
        lead = self.spec.spec.flux_container
        return (self.spec.spec.interactive and not lead.launcher) or (
            not lead.command and not lead.commands.script
        )

    @property
    def uri(self) -> str:
        """FLUX_URI of rank 0 (for ``flux proxy``)."""
        if self.layout is None:
            raise LocalError(f"MiniCluster {self.name} is not running")
        return self.layout.uri(0)

    # --- start -------------------------------------------------------------------

    def _write(self, path: Path, text: str, mode: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)

    def _prepare(self, flux: str) -> list[str]:
        self.root = Path(tempfile.mkdtemp(prefix="fluxhop-", dir=self.workdir))
        self.layout = LocalLayout(str(self.root), self.name, self.size)
        self.ports = free_ports(self.size)
        bundle = local_bundle(self.spec, self.layout, self.ports, CurveCert.generate(self.name))
        config = Path(self.layout.paths.config_dir)
        for key, relative in bundle.config_paths.items():
            self._write(config / relative, bundle.config_files[key], 0o444)
        self._write(Path(self.layout.cert_path), bundle.cert.to_zpl(), 0o400)
        for rank in range(self.size):
            Path(self.layout.flux_root(rank)).mkdir(parents=True)
        return list(bundle.container_args)

    def _environment(self, flux: str, rank: int) -> dict[str, str]:
        assert self.layout is not None
        # Inside a Flux job (or under another launcher) the brokers must not
        # take the enclosing instance's URI or PMI for their own.
        env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED)}
        env["PATH"] = f"{Path(flux).parent}{os.pathsep}{env.get('PATH', '')}"
        env.update(
            {
                "FLUXHOP_CONFIG_DIR": self.layout.paths.config_dir,
                "FLUXHOP_CURVE_DIR": self.layout.paths.curve_dir,
                "FLUXHOP_FLUX_ROOT": self.layout.flux_root(rank),
                "FLUXHOP_RANK": str(rank),
                "FLUXHOP_HOSTNAME": self.layout.host(rank),
                "FLUXHOP_MAX_RESTARTS": "0",  # a broker that fails ends the run, with its log
            }
        )
        if rank == 0:
            env["FLUXHOP_READY_FILE"] = str(self._ready_file)
        return env

    @property
    def _ready_file(self) -> Path:
        assert self.root is not None
        return self.root / "ready"

    def start(self) -> None:
        """Write the bundle and start every broker (rank 0 streams to stdout)."""
        flux = find_flux(self.flux_arg)
        check_version(flux)
        self.started = time.monotonic()
        try:
            args = self._prepare(flux)
            assert self.layout is not None
            entrypoint = f"{self.layout.paths.config_dir}/entrypoint.sh"
            for rank in range(self.size):
                argv = ["bash", entrypoint, *(args if rank == 0 else [])]
                process = subprocess.Popen(
                    argv,
                    env=self._environment(flux, rank),
                    cwd=self.spec.spec.flux_container.working_dir or os.getcwd(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE if rank == 0 else subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )
                broker = _Broker(rank, process)
                self.brokers.append(broker)
                if rank == 0:
                    broker.pump(process.stdout, self.stdout, self.output, strip=False)
                    hide = None if self.verbose else chatter
                    broker.pump(process.stderr, self.stderr, broker.tail, hide=hide)
                else:
                    broker.pump(process.stdout, None, broker.tail)
        except BaseException:
            self.stop()
            raise

    # --- watch -------------------------------------------------------------------

    def _failure(self, broker: _Broker, code: int) -> LocalError:
        broker.finish_output()
        lines = list(broker.tail)
        text = "\n".join(lines)
        host = self.layout.host(broker.rank) if self.layout else f"rank {broker.rank}"
        if "Address already in use" in text:
            port = self.ports[broker.rank] if broker.rank < len(self.ports) else "?"
            return PortConflict(
                f"rank {broker.rank} ({host}) could not bind 127.0.0.1:{port}: the port was "
                "taken after fluxhop chose it; run again to pick new ports",
                lines[-SHOWN_LINES:],
            )
        return BrokerFailed(
            f"the broker of rank {broker.rank} ({host}) exited with status {code} before "
            "the job finished; its last log lines are above",
            [f"rank {broker.rank}: {line}" for line in lines[-SHOWN_LINES:]],
        )

    def _failed_worker(self) -> LocalError | None:
        for broker in self.brokers[1:]:
            code = broker.process.poll()
            if code not in (None, 0):
                return self._failure(broker, code)
        return None

    def _join_timeout(self) -> JoinTimeout:
        context = []
        for broker in self.brokers:
            if broker.process.poll() is None:
                context += [f"rank {broker.rank}: {line}" for line in list(broker.tail)[-3:]]
        return JoinTimeout(
            f"the {self.size} brokers did not all join within {self.join_timeout:g}s "
            "(raise the wait with --timeout); the last log lines of each are above",
            context,
        )

    def _watch(
        self,
        done: Callable[[], bool],
        *,
        joined: Callable[[], bool],
        timeout: float | None = None,
    ) -> None:
        """Poll until ``done``; raise when a broker fails, the join takes too
        long, or ``timeout`` seconds pass."""
        if not self.brokers:
            raise LocalError(f"MiniCluster {self.name} is not running")
        started = time.monotonic()
        lead = self.brokers[0]
        while not done():
            if timeout is not None and time.monotonic() - started > timeout:
                raise WaitTimeout(f"MiniCluster {self.name} did not finish within {timeout:g}s")
            failure = self._failed_worker()
            if failure is not None:
                raise failure
            code = lead.process.poll()
            if code is not None and not joined():
                raise self._failure(lead, code)
            if not joined() and time.monotonic() - started > self.join_timeout:
                raise self._join_timeout()
            time.sleep(POLL)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for rank 0's job and return its exit code."""
        if not self.brokers:
            raise LocalError(f"MiniCluster {self.name} is not running")
        lead = self.brokers[0]
        self._watch(
            lambda: lead.process.poll() is not None, joined=self._ready_file.exists, timeout=timeout
        )
        lead.finish_output()
        code = lead.process.returncode
        if code != 0 and not self._ready_file.exists():
            raise self._failure(lead, code)
        self._let_workers_leave()
        self.exit_code = code
        return code

    def wait_ready(self) -> str:
        """Wait until rank 0 accepts connections; return its FLUX_URI."""
        socket_path = Path(self.uri.removeprefix("local://"))
        self._watch(socket_path.exists, joined=socket_path.exists)
        return self.uri

    def serve(self) -> None:
        """Keep an interactive instance up until a broker exits (or Ctrl-C)."""
        self._watch(lambda: self.brokers[0].process.poll() is not None, joined=lambda: True)

    def _let_workers_leave(self) -> None:
        deadline = time.monotonic() + WORKER_GRACE
        for broker in self.brokers[1:]:
            with suppress(subprocess.TimeoutExpired):
                broker.process.wait(max(0.0, deadline - time.monotonic()))

    def run(self) -> int:
        """Start, wait for the job, stop; return the job's exit code."""
        try:
            self.start()
            return self.wait()
        finally:
            self.stop()

    def lines(self) -> Iterator[str]:
        """Rank 0's output so far."""
        return iter(list(self.output))

    # --- stop --------------------------------------------------------------------

    def _signal(self, sig: int) -> None:
        """Signal each rank's whole process group: the broker outlives a
        killed entrypoint otherwise."""
        for broker in self.brokers:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(broker.process.pid, sig)

    def stop(self) -> None:
        """End every broker (TERM, then KILL) and remove the run directory."""
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for broker in self.brokers:
            with suppress(subprocess.TimeoutExpired):
                broker.process.wait(max(0.0, deadline - time.monotonic()))
        while (
            any(_group_alive(b.process.pid) for b in self.brokers) and time.monotonic() < deadline
        ):
            time.sleep(POLL)
        self._signal(signal.SIGKILL)
        for broker in self.brokers:
            broker.process.wait()
            broker.finish_output(timeout=1.0)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> LocalInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
