"""Jobs inside a running MiniCluster, from this machine: rank 0's own flux,
reached with ``kubectl exec`` and the user's kubeconfig, context and
namespace (as ``fluxhop shell``). One exec per verb: ``submit --cc 1-100``
is one exec, not a hundred. The argv and the parsing are plain data
(workload/inside.py); this module runs them and says in one line what went
wrong: no kubectl, the MiniCluster finished or not interactive, rank 0 not
running yet, flux in the pod refusing an option. ``status`` also runs the
MiniCluster's metrics.py (in its ConfigMap, at the config dir its root
records), in the same exec; a MiniCluster made before it, or whose pods the
Flux Operator made, has none and shows the status without metrics.
"""

from __future__ import annotations

import shutil
import subprocess

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.cluster.podexec import Completed, pod_exec
from fluxhop.errors import InstanceError, LocalToolMissing, NotFound
from fluxhop.workload import Root
from fluxhop.workload.inside import (
    METRICS_SCRIPT,
    STATUS_SCRIPT,
    InstanceStatus,
    parse_status,
    status_args,
)
from fluxhop.workload.verbs import FluxVerbs, Runner, refuse_closed

__all__ = ["Inside", "PodInside", "kubectl_flags"]


def kubectl_flags(kubeconfig: str | None, context: str | None, namespace: str) -> list[str]:
    """kubectl's own flags for the configuration fluxhop connected with."""
    flags = []
    if kubeconfig:
        flags += ["--kubeconfig", kubeconfig]
    if context:
        flags += ["--context", context]
    return [*flags, "--namespace", namespace]


class Inside(FluxVerbs):
    """Flux verbs inside the MiniClusters of one namespace (kubectl exec)."""

    def __init__(
        self,
        ops: MiniClusters,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        kubectl: str | None = None,
        runner: Runner = subprocess.run,
    ) -> None:
        super().__init__(runner)
        self.ops = ops
        self.flags = kubectl_flags(kubeconfig, context, ops.kube.namespace)
        self._kubectl = kubectl

    @property
    def kubectl(self) -> str:
        found = self._kubectl or shutil.which("kubectl")
        if found is None:
            raise LocalToolMissing(
                "kubectl is not on PATH; fluxhop runs flux inside the MiniCluster with "
                "kubectl exec: install kubectl"
            )
        return found

    def _lead(self, name: str, *, submit: bool) -> tuple[Root, str]:
        root = self.ops.require(name)
        status = self.ops.status(root)
        ended = status.state if status.state in ("Succeeded", "Failed") else None
        refuse_closed(name, ended=ended, interactive=root.interactive, submit=submit)
        lead = self.ops.lead_pod(root)
        phase = (lead or {}).get("status", {}).get("phase")
        if lead is None or phase != "Running":
            if status.problems:  # what a node says stops it, not a wait
                raise NotFound(f"MiniCluster {name}: rank 0 is not running: {status.problems[0]}")
            raise NotFound(
                f"MiniCluster {name}: rank 0 is not running yet "
                f"({'no pod' if lead is None else 'pod ' + str(phase)}); wait for it with "
                f"fluxhop create, or see fluxhop get {name}"
            )
        return root, str(lead["metadata"]["name"])

    def where(self, name: str, *, submit: bool, stdin: bool) -> tuple[list[str], str | None]:
        kubectl = self.kubectl
        root, pod = self._lead(name, submit=submit)
        prefix = [kubectl, *self.flags, "exec", *(["-i"] if stdin else []), pod]
        prefix += ["-c", root.container, "--"]
        return prefix, root.flux_root if root.fluxhop_pods else None

    def status(self, name: str) -> InstanceStatus:
        root = self.ops.require(name)
        # fluxhop's pods carry metrics.py in their ConfigMap (those made before
        # it do not: the script skips what is absent); the Flux Operator's none
        metrics = f"{root.config_dir}/{METRICS_SCRIPT}" if root.fluxhop_pods else None
        out = self.run(
            name, status_args(metrics), what="flux resource status", script=STATUS_SCRIPT
        )
        return parse_status(out)


class PodInside(FluxVerbs):
    """Flux verbs in one rank 0 pod already found, through the API server's
    exec (cluster/podexec.py): no kubectl and no stdin, so nothing streams.
    fluxhop's operator uses it; it knows the pod from its own watch."""

    def __init__(self, kube: Kube, root: Root, pod: str, *, timeout: float = 60) -> None:
        super().__init__(self._exec)
        self.kube, self.root, self.pod, self.timeout = kube, root, pod, timeout

    def where(self, name: str, *, submit: bool, stdin: bool) -> tuple[list[str], str | None]:
        if stdin:
            raise InstanceError(f"MiniCluster {name}: streaming needs kubectl exec")
        return [], self.root.flux_root if self.root.fluxhop_pods else None

    def _exec(self, argv: list[str], **_: object) -> Completed:
        return pod_exec(self.kube, self.pod, self.root.container, argv, timeout=self.timeout)
