"""Long-lived local MiniClusters: brokers on this machine that outlive the
command that started them (``fluxhop create --local``), found again by later
commands (``list``, ``get``, ``status``, ``submit``, ``jobs``, ``cancel``,
``logs``, ``delete`` with ``--local``, or without it when there is no
Kubernetes configuration: cli/where.py).

One directory per MiniCluster under the user's runtime directory
(``$XDG_RUNTIME_DIR/fluxhop``, else ``/tmp/fluxhop-<uid>``; ``FLUXHOP_STATE_DIR``
overrides): the instance's files, the brokers' logs, rank 0's output and exit
code, and ``instance.json`` (its size, process groups and rank 0's URI). An
entry whose brokers died is said and cleaned the next time it is looked at,
never left behind as a zombie.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from fluxhop.arguments import checked
from fluxhop.errors import AlreadyExists, FluxhopWarning, InputError, NotFound, shown
from fluxhop.local.instance import EXIT_FILE, OUTPUT_FILE, LocalInstance
from fluxhop.local.processes import POLL, session_alive, started_after, stop_sessions
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.names import dns_label_problem
from fluxhop.workload import Status
from fluxhop.workload.verbs import refuse_closed

__all__ = ["LocalStore", "Record", "state_dir"]

RECORD = "instance.json"


def state_dir() -> Path:
    named = os.environ.get("FLUXHOP_STATE_DIR")
    if named:
        return Path(named)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "fluxhop"
    return Path(tempfile.gettempdir()) / f"fluxhop-{os.getuid()}"


@dataclass
class Record:
    """What a later command needs to know of a detached local MiniCluster."""

    name: str
    size: int
    interactive: bool
    uri: str
    flux_root: str  # rank 0's: run/env.sh there gives its flux
    pgids: list[int]
    created: float  # seconds since the epoch
    directory: str

    def alive(self) -> list[bool]:
        """Each rank's broker session still runs (a reused number is not it)."""
        return [session_alive(p) and not started_after(p, self.created) for p in self.pgids]

    def exit_code(self) -> int | None:
        path = Path(self.directory) / EXIT_FILE
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    def status(self) -> Status:
        alive = self.alive()
        code = self.exit_code()
        if code is not None:
            state = "Succeeded" if code == 0 else "Failed"
        else:
            state = "Running" if all(alive) else "Failed"
        pods = {"Running": sum(alive)} if any(alive) else {}
        age = max(0.0, time.time() - self.created)
        return Status(self.name, "local", self.size, self.size, state, age, pods, code)


class LocalStore:
    """The detached local MiniClusters of this user."""

    def __init__(
        self,
        directory: Path | None = None,
        *,
        flux: str | None = None,
        join_timeout: float = 60.0,
        verbose: bool = False,
    ) -> None:
        self.directory = directory or state_dir()
        self.flux = flux
        self.join_timeout = join_timeout
        self.verbose = verbose

    @property
    def namespace(self) -> str:
        return "local"

    def _path(self, name: str) -> Path:
        # A MiniCluster's name is a DNS label: never "..", "/" or a path of any kind.
        problem = dns_label_problem(name)
        if problem:
            raise InputError(f"local MiniCluster name {shown(name)} {problem}")
        return self.directory / name

    # --- create -------------------------------------------------------------------

    @checked
    def create(self, spec: MiniCluster) -> Record:
        """Start the brokers in the background; return once rank 0 takes jobs
        (Ctrl-C or a failure before that leaves nothing behind)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self._path(spec.name).exists() and self.find(spec.name) is not None:
            raise AlreadyExists(
                f"local MiniCluster {spec.name} is already running; "
                f"delete it first (fluxhop delete --local {spec.name})"
            )
        instance = LocalInstance(
            spec,
            flux=self.flux,
            join_timeout=self.join_timeout,
            verbose=self.verbose,
            detached=self._path(spec.name),
        )
        try:
            instance.start()
            uri = instance.wait_running()
            assert instance.layout is not None
            record = Record(
                name=spec.name,
                size=instance.size,
                interactive=instance.interactive,
                uri=uri,
                flux_root=instance.layout.flux_root(0),
                pgids=[broker.process.pid for broker in instance.brokers],
                created=time.time(),
                directory=str(self._path(spec.name)),
            )
            (self._path(spec.name) / RECORD).write_text(json.dumps(asdict(record)))
        except BaseException:
            instance.stop()
            raise
        return record

    # --- find ---------------------------------------------------------------------

    def _read(self, name: str) -> Record | None:
        try:
            data = json.loads((self._path(name) / RECORD).read_text())
            return Record(**data)
        except (OSError, ValueError, TypeError):
            return None

    def _clean(self, name: str, record: Record | None, why: str) -> None:
        if record is not None:
            stop_sessions(record.pgids, started_by=record.created)
        shutil.rmtree(self._path(name), ignore_errors=True)
        warnings.warn(f"local MiniCluster {name} {why}; removed it", FluxhopWarning, stacklevel=3)

    @checked
    def find(self, name: str) -> Record | None:
        """The record of a MiniCluster, or None; a stale entry (its brokers
        gone before rank 0's job ended) is said and cleaned."""
        if not self._path(name).is_dir():
            return None
        record = self._read(name)
        if record is None:
            self._clean(name, None, "was left half-created (no instance.json)")
            return None
        alive = record.alive()
        if record.exit_code() is None and not all(alive):
            dead = [str(rank) for rank, up in enumerate(alive) if not up]
            self._clean(name, record, f"had died: the brokers of rank {','.join(dead)} are gone")
            return None
        return record

    @checked
    def require(self, name: str) -> Record:
        record = self.find(name)
        if record is None:
            raise NotFound(f"no local MiniCluster {name} (fluxhop list --local shows them)")
        return record

    @checked
    def running(self, name: str, *, submit: bool = False) -> Record:
        """A MiniCluster that can take flux commands now."""
        record = self.require(name)
        code = record.exit_code()
        refuse_closed(
            name,
            ended=None if code is None else f"exit code {code}",
            interactive=record.interactive,
            submit=submit,
            then=f"fluxhop delete --local {name} removes it",
        )
        return record

    @checked
    def status(self, name: str) -> Status:
        return self.require(name).status()

    def list(self) -> list[Status]:
        if not self.directory.is_dir():
            return []
        found = (
            self.find(path.name)
            for path in sorted(self.directory.iterdir())
            if path.is_dir() and dns_label_problem(path.name) is None
        )
        return [record.status() for record in found if record is not None]

    @checked
    def logs(self, name: str, *, follow: bool = False) -> Iterator[str]:
        """Rank 0's output; ``follow``: until rank 0 ends."""
        record = self.require(name)
        with open(Path(record.directory) / OUTPUT_FILE, errors="replace") as output:
            while True:
                line = output.readline()
                if line:
                    yield line
                elif (
                    not follow
                    or record.exit_code() is not None
                    or not session_alive(record.pgids[0])
                ):
                    yield from output  # what came before it ended
                    return
                else:
                    time.sleep(POLL)  # a file has no end-of-data event to wait for

    # --- delete ---------------------------------------------------------------------

    @checked
    def delete(self, name: str) -> None:
        """Stop every broker (TERM, then KILL) and remove the directory."""
        record = self._read(name) if self._path(name).is_dir() else None
        if record is None and not self._path(name).is_dir():
            raise NotFound(f"no local MiniCluster {name} (fluxhop list --local shows them)")
        if record is not None:
            stop_sessions(record.pgids, started_by=record.created)
        shutil.rmtree(self._path(name), ignore_errors=True)
