"""The verbs on a running MiniCluster's instance - submit, jobs, status,
cancel, attach - once for every backend. A backend says how to reach rank 0
(:meth:`FluxVerbs.where`: ``kubectl exec`` into its pod, or nothing on this
machine) and hands in the function that runs a process; the verbs, their
one exec each and their one-line errors are the same everywhere."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from fluxhop.errors import InstanceError
from fluxhop.flux.jobid import parse as parse_jobid
from fluxhop.flux.jobspec import Jobspec
from fluxhop.workload.inside import (
    BROKER_NOT_STARTED,
    FLUX_SCRIPT,
    STATUS_SCRIPT,
    InstanceStatus,
    Job,
    in_pod,
    parse_jobs,
    parse_status,
    submit_args,
)

__all__ = ["Completed", "FluxVerbs", "Runner", "refuse_closed"]


class Completed(Protocol):
    """What running a process gives back (subprocess.CompletedProcess)."""

    returncode: int
    stdout: Any
    stderr: Any


Runner = Callable[..., Completed]


def refuse_closed(
    name: str,
    *,
    ended: str | None,
    interactive: bool | None,
    submit: bool,
    then: str = "create an interactive one (no command) to submit jobs into",
) -> None:
    """The one-line refusals every backend gives: the MiniCluster's instance
    has ended (``ended`` says how), or a job is submitted into one that is not
    interactive (its instance ends with the job rank 0 runs)."""
    if ended is not None:
        raise InstanceError(
            f"MiniCluster {name} has finished ({ended}); its instance is gone: {then}"
        )
    if submit and interactive is False:
        raise InstanceError(
            f"MiniCluster {name} is not interactive: its instance ends with the job rank 0 "
            "runs; create one with no command to submit jobs into"
        )


# What kubectl exec adds after a command that failed: flux's own last line,
# above it, is the one that says why.
_EXEC_TRAILER = re.compile(r"command terminated with exit code \d+")


class FluxVerbs(ABC):
    """Flux verbs on the running MiniClusters of one backend."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    @abstractmethod
    def where(self, name: str, *, submit: bool, stdin: bool) -> tuple[list[str], str | None]:
        """(the argv prefix that runs a command beside rank 0's broker, the
        Flux root there or None for a Flux Operator pod); raises, in one line,
        when the MiniCluster cannot take the command."""

    def _argv(
        self,
        name: str,
        args: Sequence[str],
        *,
        script: str = FLUX_SCRIPT,
        submit: bool = False,
        stdin: bool = False,
    ) -> list[str]:
        prefix, flux_root = self.where(name, submit=submit, stdin=stdin)
        return [*prefix, *in_pod(flux_root, args, script=script)]

    def _failed(self, name: str, result: Completed, what: str) -> InstanceError:
        lines = [
            line.strip()
            for line in str(result.stderr or "").splitlines()
            if line.strip() and not _EXEC_TRAILER.fullmatch(line.strip())
        ]
        last = lines[-1] if lines else f"exit status {result.returncode}"
        if result.returncode == BROKER_NOT_STARTED or last.startswith("fluxhop: "):
            return InstanceError(f"MiniCluster {name}: {last.removeprefix('fluxhop: ')}")
        if "unrecognized arguments" in last or "invalid choice" in last or "No such" in last:
            return InstanceError(
                f"flux in MiniCluster {name} refused {what}: {last} (the image's flux-core may be "
                "too old for this option)"
            )
        if "nsatisfiable" in last:  # refused by the scheduler's feasibility check
            last += (
                " (not even at its maxSize does the MiniCluster have what the job asks: "
                "check -N, -n, -c and -g)"
            )
        return InstanceError(f"{what} in MiniCluster {name} failed: {last}")

    def run(
        self,
        name: str,
        args: Sequence[str],
        *,
        what: str,
        submit: bool = False,
        script: str = FLUX_SCRIPT,
        stdin: str | None = None,
    ) -> str:
        """flux ARGS beside rank 0 (or ``script``), ``stdin`` its input, its
        stdout; a failure is one line."""
        argv = self._argv(name, args, submit=submit, script=script, stdin=stdin is not None)
        result = self.runner(argv, input=stdin, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise self._failed(name, result, what)
        return str(result.stdout)

    def stream(self, name: str, args: Sequence[str], *, submit: bool = False) -> int:
        """flux ARGS with this process's stdin/stdout/stderr; its exit code."""
        result = self.runner(self._argv(name, args, submit=submit, stdin=True), check=False)
        return int(result.returncode)

    def submit(self, name: str, command: Sequence[str], **shape: Any) -> list[str]:
        """Submit ``command`` (``cc``: one job per id, in the same exec); the job IDs."""
        out = self.run(name, submit_args(command, **shape), what="flux submit", submit=True)
        return [line.strip() for line in out.splitlines() if line.strip()]

    def submit_watch(self, name: str, command: Sequence[str], **shape: Any) -> int:
        """Submit and stream the job's output (flux submit --watch); its exit code."""
        return self.stream(name, submit_args(command, watch=True, **shape), submit=True)

    def submit_jobspec(self, name: str, jobspec: Jobspec) -> str:
        """Submit a jobspec as it is (flux job submit, on its stdin); the job ID."""
        out = self.run(name, ["job", "submit"], what="flux job submit", submit=True,
                       stdin=jobspec.to_json())  # fmt: skip
        return out.strip()

    def jobs(self, name: str, *, all_jobs: bool = False) -> list[Job]:
        args = ["jobs", "--json", *(["-a"] if all_jobs else [])]
        return parse_jobs(self.run(name, args, what="flux jobs"))

    def status(self, name: str) -> InstanceStatus:
        return parse_status(self.run(name, [], what="flux resource status", script=STATUS_SCRIPT))

    def cancel(self, name: str, jobids: Sequence[str]) -> None:
        if not jobids:
            raise InstanceError("cancel needs at least one job ID")
        for jobid in jobids:
            parse_jobid(jobid)  # a typo is one line here, not flux's usage text
        self.run(name, ["cancel", *jobids], what="flux cancel")

    def attach(self, name: str, jobid: str) -> int:
        parse_jobid(jobid)
        return self.stream(name, ["job", "attach", jobid])
