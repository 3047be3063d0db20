"""Jobs inside a running MiniCluster, from this machine: rank 0's own flux,
reached with ``kubectl exec`` and the user's kubeconfig, context and
namespace (as ``fluxhop shell``). One exec per verb: ``submit --cc 1-100``
is one exec, not a hundred. The argv and the parsing are plain data
(workload/inside.py); this module runs them and says in one line what went
wrong: no kubectl, the MiniCluster finished or not interactive, rank 0 not
running yet, flux in the pod refusing an option.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InstanceError, LocalToolMissing, NotFound
from fluxhop.flux.jobid import parse as parse_jobid
from fluxhop.workload import Root
from fluxhop.workload.inside import (
    BROKER_NOT_STARTED,
    STATUS_SCRIPT,
    InstanceStatus,
    Job,
    exec_argv,
    parse_jobs,
    parse_status,
    submit_args,
)

__all__ = ["Inside", "kubectl_flags"]

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def kubectl_flags(kubeconfig: str | None, context: str | None, namespace: str) -> list[str]:
    """kubectl's own flags for the configuration fluxhop connected with."""
    flags = []
    if kubeconfig:
        flags += ["--kubeconfig", kubeconfig]
    if context:
        flags += ["--context", context]
    return [*flags, "--namespace", namespace]


class Inside:
    """Flux verbs inside the MiniClusters of one namespace."""

    def __init__(
        self,
        ops: MiniClusters,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        kubectl: str | None = None,
        runner: Runner = subprocess.run,
    ) -> None:
        self.ops = ops
        self.flags = kubectl_flags(kubeconfig, context, ops.kube.namespace)
        self._kubectl = kubectl
        self.runner = runner

    @property
    def kubectl(self) -> str:
        found = self._kubectl or shutil.which("kubectl")
        if found is None:
            raise LocalToolMissing(
                "kubectl is not on PATH; fluxhop runs flux inside the MiniCluster with "
                "kubectl exec: install kubectl"
            )
        return found

    # --- reaching rank 0 ----------------------------------------------------------------

    def _lead(self, name: str, *, submit: bool = False) -> tuple[Root, str]:
        root = self.ops.require(name)
        state = self.ops.status(root).state
        if state in ("Succeeded", "Failed"):
            raise InstanceError(
                f"MiniCluster {name} has finished ({state}); its instance is gone. Create an "
                "interactive one (no command) to submit jobs into"
            )
        if submit and root.interactive is False:
            raise InstanceError(
                f"MiniCluster {name} is not interactive: its instance ends with the job rank 0 "
                "runs; create one with no command to submit jobs into"
            )
        lead = self.ops.lead_pod(root)
        phase = (lead or {}).get("status", {}).get("phase")
        if lead is None or phase != "Running":
            raise NotFound(
                f"MiniCluster {name}: rank 0 is not running yet "
                f"({'no pod' if lead is None else 'pod ' + str(phase)}); wait for it with "
                f"fluxhop create, or see fluxhop get {name}"
            )
        return root, str(lead["metadata"]["name"])

    def _argv(self, name: str, args: Sequence[str], **kwargs: Any) -> list[str]:
        submit = kwargs.pop("submit", False)
        root, pod = self._lead(name, submit=submit)
        return exec_argv([self.kubectl, *self.flags], root, pod, args, **kwargs)

    def _failed(
        self, name: str, result: subprocess.CompletedProcess[str], what: str
    ) -> InstanceError:
        lines = [line.strip() for line in (result.stderr or "").splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {result.returncode}"
        if result.returncode == BROKER_NOT_STARTED or last.startswith("fluxhop: "):
            return InstanceError(f"MiniCluster {name}: {last.removeprefix('fluxhop: ')}")
        if "unrecognized arguments" in last or "invalid choice" in last or "No such" in last:
            return InstanceError(
                f"flux in MiniCluster {name} refused {what}: {last} (the image's flux-core may be "
                "too old for this option)"
            )
        return InstanceError(f"{what} in MiniCluster {name} failed: {last}")

    def run(self, name: str, args: Sequence[str], *, what: str, submit: bool = False) -> str:
        """flux ARGS in rank 0, its stdout; a failure is one line."""
        result = self.runner(
            self._argv(name, args, submit=submit), capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise self._failed(name, result, what)
        return str(result.stdout)

    def stream(self, name: str, args: Sequence[str], *, submit: bool = False) -> int:
        """flux ARGS in rank 0 with this terminal's stdin/stdout/stderr; its exit code."""
        result = self.runner(self._argv(name, args, submit=submit, stdin=True), check=False)
        return int(result.returncode)

    # --- the verbs --------------------------------------------------------------------

    def submit(
        self,
        name: str,
        command: Sequence[str],
        *,
        nodes: int | None = None,
        ntasks: int | None = None,
        cores: int | None = None,
        gpus: int | None = None,
        options: Sequence[str] = (),
        cc: str | None = None,
    ) -> list[str]:
        """Submit ``command`` (``cc``: one job per id, in the same exec); the job IDs."""
        args = submit_args(
            command, nodes=nodes, ntasks=ntasks, cores=cores, gpus=gpus, options=options, cc=cc
        )
        out = self.run(name, args, what="flux submit", submit=True)
        return [line.strip() for line in out.splitlines() if line.strip()]

    def submit_watch(self, name: str, command: Sequence[str], **shape: Any) -> int:
        """Submit and stream the job's output (flux submit --watch); its exit code."""
        return self.stream(name, submit_args(command, watch=True, **shape), submit=True)

    def jobs(self, name: str, *, all_jobs: bool = False) -> list[Job]:
        args = ["jobs", "--json", *(["-a"] if all_jobs else [])]
        return parse_jobs(self.run(name, args, what="flux jobs"))

    def status(self, name: str) -> InstanceStatus:
        root, pod = self._lead(name)
        argv = exec_argv([self.kubectl, *self.flags], root, pod, [], script=STATUS_SCRIPT)
        result = self.runner(argv, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise self._failed(name, result, "flux resource status")
        return parse_status(result.stdout)

    def cancel(self, name: str, jobids: Sequence[str]) -> None:
        if not jobids:
            raise InstanceError("cancel needs at least one job ID")
        for jobid in jobids:
            parse_jobid(jobid)  # a typo is one line here, not flux's usage text
        self.run(name, ["cancel", *jobids], what="flux cancel")

    def attach(self, name: str, jobid: str) -> int:
        parse_jobid(jobid)
        return self.stream(name, ["job", "attach", jobid])
