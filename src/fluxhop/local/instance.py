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
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

from fluxhop.errors import BrokerFailed, JoinTimeout, LocalError, PortConflict, WaitTimeout
from fluxhop.flux.curve import CurveCert
from fluxhop.local.broker import TAIL_LINES, Broker, Sink, chatter
from fluxhop.local.flux import check_version, find_flux
from fluxhop.local.processes import (
    POLL,
    STOP_GRACE,
    free_ports,
    gone,
    interrupts_held,
    session_alive,
    signal_session,
)
from fluxhop.render.localhost import LocalLayout, local_bundle
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["EXIT_FILE", "OUTPUT_FILE", "LocalInstance", "free_ports"]

# Detached brokers outlive the command that started them; their Popen objects
# are kept here so that dropping them does not warn that they still run.
_DETACHED: list[subprocess.Popen[str]] = []
EXIT_FILE = "exit-code"  # a detached rank 0's exit code
OUTPUT_FILE = "output.log"  # a detached rank 0's stdout (the job's output)

SHOWN_LINES = 8
WORKER_GRACE = 10.0  # seconds workers get to leave after rank 0 is done
# Answered once the broker is in its RUN state. (flux proxy waits for that
# only when it reconnects: a job submitted after it could find no job-ingest.)
WAIT_RUNNING = "import flux; flux.Flux().rpc('state-machine.wait').get()"
INHERITED = ("FLUX_URI", "FLUX_JOB_", "FLUX_TASK_", "FLUX_KVS_NAMESPACE", "PMI_", "PMIX_")


def refuse_growth(spec: MiniCluster) -> None:
    """A local instance starts all its brokers at once and is never resized:
    a maxSize above its size would only list ranks that never come, and a
    job asking for them would wait for ever."""
    body = spec.spec
    if body.max_nodes > body.size:
        raise LocalError(
            f"maxSize {body.max_nodes} does not apply to a local MiniCluster: all its "
            "brokers start at once and it cannot be scaled; drop --max-size "
            f"(spec.maxSize{' and spec.autoscale' if body.autoscale else ''}) or give "
            f"-N {body.max_nodes}"
        )


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
        detached: Path | None = None,
    ) -> None:
        """``verbose`` passes the brokers' info lines on to ``stderr``; by
        default only warnings and errors are shown, as with ``flux start``.

        ``detached``: the instance lives in that (new) directory and its
        brokers outlive this process: their output goes to files there
        (``output.log`` is rank 0's stdout, ``rank-N.log`` each rank's log)
        and rank 0's exit code to ``exit-code`` (see local/store.py)."""
        self.detached = detached
        self.spec = spec
        self.verbose = verbose
        self.flux_arg = flux
        self.workdir = workdir
        self.join_timeout = join_timeout
        self.stdout: Sink = stdout if stdout is not None else sys.stdout
        self.stderr: Sink = stderr if stderr is not None else sys.stderr
        self.root: Path | None = None
        self.layout: LocalLayout | None = None
        self.brokers: list[Broker] = []
        self.stopped = False  # stop() ran: their numbers may be others' now
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
        if self.detached is not None:
            self.detached.mkdir(mode=0o700)  # exists: another instance's; never shared
            self.root = self.detached
        else:
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
        refuse_growth(self.spec)
        flux = find_flux(self.flux_arg)
        check_version(flux)
        self.started = time.monotonic()
        try:
            args = self._prepare(flux)
            assert self.layout is not None
            entrypoint = f"{self.layout.paths.config_dir}/entrypoint.sh"
            for rank in range(self.size):
                argv = ["bash", entrypoint, *(args if rank == 0 else [])]
                if self.detached is not None:
                    self._start_detached(rank, argv, flux)
                    continue
                with interrupts_held():
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
                    broker = Broker(rank, process)
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

    def _start_detached(self, rank: int, argv: list[str], flux: str) -> None:
        """A broker that outlives fluxhop: own session, no pipes, output in files."""
        assert self.root is not None
        if rank == 0:  # its exit code, for later commands (written once it ends)
            record = f'"$@"; code=$?; echo "$code" > {shlex.quote(str(self.root / EXIT_FILE))}; exit "$code"'
            argv = ["bash", "-c", record, "fluxhop", *argv]
        log = self.root / f"rank-{rank}.log"
        out_file = self.root / OUTPUT_FILE if rank == 0 else log
        with interrupts_held(), open(log, "a") as err, open(out_file, "a") as out:
            process = subprocess.Popen(
                argv,
                env=self._environment(flux, rank),
                cwd=self.spec.spec.flux_container.working_dir or os.getcwd(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                text=True,
                start_new_session=True,
            )
            broker = Broker(rank, process)
            broker.log = log
            self.brokers.append(broker)
            _DETACHED.append(process)

    # --- watch -------------------------------------------------------------------

    def _failure(self, broker: Broker, code: int) -> LocalError:
        broker.finish_output()
        lines = list(broker.tail)
        if broker.log is not None and broker.log.exists():
            lines = broker.log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
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

    def wait_running(self) -> str:
        """Wait until rank 0 takes jobs (its broker in RUN state: rc1 has
        loaded job-ingest and the scheduler); its URI."""
        uri = self.wait_ready()
        flux = find_flux(self.flux_arg)
        env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED)}
        env["FLUX_URI"] = uri
        try:
            result = subprocess.run(
                [flux, "python", "-c", WAIT_RUNNING],
                env=env,
                capture_output=True,
                text=True,
                timeout=self.join_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise self._join_timeout() from None
        if result.returncode != 0:
            lead = self.brokers[0]
            code = lead.process.poll()
            if code is not None:
                raise self._failure(lead, code)
            raise LocalError(
                f"MiniCluster {self.name} did not come up: {uri}: "
                + (result.stderr.strip().splitlines() or ["failed"])[-1]
            )
        return uri

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
        """Signal each rank's whole session: the broker outlives a killed
        entrypoint otherwise, and its rc scripts and job shells the broker."""
        for broker in self.brokers:
            signal_session(broker.process.pid, sig)

    def stop(self) -> None:
        """End every broker (TERM, then KILL) and remove the run directory;
        once (a cleanup and a finally may both ask)."""
        if self.stopped:
            return
        self.stopped = True
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for broker in self.brokers:
            with suppress(subprocess.TimeoutExpired):
                broker.process.wait(max(0.0, deadline - time.monotonic()))
        while (
            any(session_alive(b.process.pid) for b in self.brokers) and time.monotonic() < deadline
        ):
            time.sleep(POLL)
        self._signal(signal.SIGKILL)
        for broker in self.brokers:
            broker.process.wait()
            broker.finish_output(timeout=1.0)
        gone([b.process.pid for b in self.brokers])
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> LocalInstance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
