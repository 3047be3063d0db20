"""``fluxhop operator`` for one test's namespace, run the way the cluster
allows:

* **as a pod**, where the cluster has real nodes and the operator's image is
  built from this tree (tests/realk8s/images/operator_image.py): deploy/'s
  Deployment's pod template (its ServiceAccount and token, pod security,
  probes, image) with the test's arguments, placed on the real nodes, in
  deploy/'s namespace; it reaches the API server through the `kubernetes`
  Service, as deploy/'s Deployment does (tests/realk8s/test_deploy.py);
* **as a process here**, with a token of deploy/'s ServiceAccount, on a
  cluster without real nodes: a MultiKueue manager (a control plane only).

Either way deploy/'s ClusterRole, enforced by the API server, is all it may do.
"""

from __future__ import annotations

import copy
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.realk8s.cluster import LocalCluster, free_port
from tests.realk8s.deployment import DEPLOY_NAMESPACE
from tests.realk8s.images.build import images_dir
from tests.realk8s.images.operator_image import deployed_template, operator_image_current
from tests.realk8s.placing import ON_REAL_NODES
from tests.realk8s.tools import command_env, eventually, pod_log

__all__ = ["Operator"]

PODS = f"/api/v1/namespaces/{DEPLOY_NAMESPACE}/pods"
_numbers = itertools.count()


class Operator:
    """``fluxhop operator -n NAMESPACE FLAGS`` with ``env``; its log is
    written to ``log`` (a pod's when it stops, and whenever it is read)."""

    def __init__(self, cluster: LocalCluster, kubeconfig: Path, namespace: str, log: Path,
                 *flags: str, process: bool = False, **env: str) -> None:  # fmt: skip
        """``process``: a process even where the cluster has nodes (a test
        that asks for it says why)."""
        self.cluster, self.log = cluster, log
        self.pod: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        if not process and cluster.real_nodes and operator_image_current(images_dir()):
            self._start_pod(namespace, flags, env)
        else:
            self._start_process(kubeconfig, namespace, flags, env)

    # --- a pod ------------------------------------------------------------------------

    def _start_pod(self, namespace: str, flags: tuple[str, ...], env: dict[str, str]) -> None:
        template = deployed_template()
        spec = template["spec"]
        spec.update(copy.deepcopy(ON_REAL_NODES))
        spec["restartPolicy"] = "Never"  # a crash is the test's to see, not hidden by a restart
        (container,) = spec["containers"]
        container["args"] = ["operator", "-n", namespace, *flags]
        named = {e["name"] for e in container.get("env") or []}
        container["env"] = [*(container.get("env") or []),
                            *({"name": k, "value": v} for k, v in env.items() if k not in named)]  # fmt: skip
        self.pod = f"operator-{namespace}-{next(_numbers)}"
        labels = {"fluxhop.test/operator-for": namespace}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.pod, "labels": labels}, "spec": spec}  # fmt: skip
        with self.cluster.admin() as admin:
            admin.create(PODS, body)

    def _pod_log(self) -> str:
        return pod_log(self.cluster, DEPLOY_NAMESPACE, self.pod)

    # --- a process ----------------------------------------------------------------------

    def _start_process(self, kubeconfig: Path, namespace: str, flags: tuple[str, ...],
                       env: dict[str, str]) -> None:  # fmt: skip
        argv = [sys.executable, "-c", "import sys; from fluxhop.cli import main; sys.exit(main())",
                "operator", "-n", namespace,
                "--liveness", f"http://127.0.0.1:{free_port()}/healthz", *flags]  # fmt: skip
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(argv, env=command_env(self.cluster, kubeconfig, **env),
                                            stdout=out, stderr=subprocess.STDOUT)  # fmt: skip

    # --- either -------------------------------------------------------------------------

    def text(self) -> str:
        """Its whole log so far."""
        if self.pod is not None:
            said = self._pod_log()
            if said:
                self.log.write_text(said)
        return self.log.read_text(errors="replace") if self.log.is_file() else ""

    def tail(self) -> str:
        return self.text()[-3000:]

    def cpu_seconds(self) -> float:
        """The CPU time it has used: the process's, or the pod's container's
        as its kubelet counts it (the summary API, through the API server)."""
        if self.process is not None:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        with self.cluster.admin() as admin:
            node = eventually(f"{self.pod} on a node",
                              lambda: admin.get(f"{PODS}/{self.pod}")["spec"].get("nodeName"), 120)  # fmt: skip

            def counted() -> float | None:  # once its kubelet has its container's stats
                summary = admin.get(f"/api/v1/nodes/{node}/proxy/stats/summary")
                mine = [p for p in summary.get("pods") or [] if p["podRef"]["name"] == self.pod]
                containers = mine[0].get("containers") or [] if mine else []
                used = [(c.get("cpu") or {}).get("usageCoreNanoSeconds") for c in containers]
                return int(used[0]) / 1e9 if used and used[0] is not None else None

            return float(
                eventually(f"{self.pod}'s CPU time in its kubelet's summary", counted, 120)
            )

    def alive(self) -> bool:
        """Still running: the process, or the pod's container (never restarted)."""
        if self.process is not None:
            return self.process.poll() is None
        with self.cluster.admin() as admin:
            status = admin.get(f"{PODS}/{self.pod}").get("status") or {}
        return status.get("phase") in ("Pending", "Running")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.pod is not None:
            self.text()  # its log, kept
            with self.cluster.admin() as admin:
                path = f"{PODS}/{self.pod}"
                if admin.find(path) is not None:
                    admin.delete(path)
                eventually(f"{self.pod} gone", lambda: admin.find(path) is None, 120)
            self.pod = None
