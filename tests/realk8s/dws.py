"""DWS's Workflow machine on the test cluster (issue #36): the Workflow
controller and its admission webhook, built by ``python -m tests.build
peers`` from a copy of ``../shared/upstream/dws`` (tests/peers), run as two
processes of the one program as upstream's two Deployments run it
(``--mode=controller``, ``--mode=webhook``), each with a token of its own
ServiceAccount bound to upstream's ClusterRole (config/rbac/role.yaml,
webhook_role.yaml), so those roles, enforced by the API server, are all
they may do. Leader election off, metrics off, health probes on free ports.

Installed with them: DWS's 10 CRDs (config/crd/bases), NNF's four
(../shared/conformance/crds/) and NNF's rule set
(../shared/upstream/nnf-sos/config/dws/nnf-ruleset.yaml) in the namespace
the webhook reads rules from (POD_NAMESPACE). The webhook serves on 9443,
the port it has no flag for, with a certificate from the cluster's CA in
``$TMPDIR/k8s-webhook-server/serving-certs``; its two configurations
(config/webhook/manifests.yaml) point at it on loopback and are deleted
before it stops (they fail closed).

The hardware's side of each state (what nnf-sos writes) is played by
tests/realk8s/nnf.py; the workload manager's by tests/realk8s/wlm.py.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any

import yaml

from tests.conformance import CONFORMANCE, upstream
from tests.peers import DWS
from tests.realk8s.cluster import LocalCluster, free_port, healthy, wait_until
from tests.realk8s.controllers import established
from tests.realk8s.processes import Process
from tests.realk8s.tools import kubectl

__all__ = ["DWS_API", "NAMESPACE", "NNF_API", "Dws", "missing_dws"]

NAMESPACE = "dws-system"  # upstream's (config/default), and where NNF's rules go
WEBHOOK_PORT = 9443  # controller-runtime's default; DWS has no flag for it
DWS_API = "/apis/dataworkflowservices.github.io/v1alpha7"
NNF_API = "/apis/nnf.cray.hpe.com/v1alpha11"
NNF_CRDS = ("nnfaccesses", "nnfcontainerdata", "nnfcontainerprofiles", "nnfstorages")
# process -> (ServiceAccount, upstream's ClusterRole file)
ACCOUNTS = {"controller": ("dws-controller-manager", "role.yaml"),
            "webhook": ("dws-webhook", "webhook_role.yaml")}  # fmt: skip


def missing_dws() -> str | None:
    """Why DWS cannot run here, or None."""
    reason = DWS.missing()
    if reason:
        return reason
    if not (upstream("nnf-sos") / "config" / "dws" / "nnf-ruleset.yaml").is_file():
        return "no NNF rule set at ../shared/upstream/nnf-sos/config/dws/nnf-ruleset.yaml"
    return None


def crd_files() -> list[Path]:
    """DWS's CRDs (its own snapshot) and NNF's (the conformance ones)."""
    bases = DWS.source() / "config" / "crd" / "bases"
    nnf = [CONFORMANCE / "crds" / f"nnf.cray.hpe.com_{name}.yaml" for name in NNF_CRDS]
    return sorted(bases.glob("*.yaml")) + nnf


def rbac() -> list[dict[str, Any]]:
    """The namespace, a ServiceAccount per process, upstream's roles, bindings."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    ]
    for account, role_file in ACCOUNTS.values():
        role = yaml.safe_load((DWS.source() / "config" / "rbac" / role_file).read_text())
        role = copy.deepcopy(role)
        role["metadata"] = {"name": account}
        objects += [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": account, "namespace": NAMESPACE}},
            role,
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": account},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
             "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]},
        ]  # fmt: skip
    return objects


def ruleset() -> dict[str, Any]:
    rules: dict[str, Any] = yaml.safe_load(
        (upstream("nnf-sos") / "config" / "dws" / "nnf-ruleset.yaml").read_text()
    )
    rules["metadata"]["namespace"] = NAMESPACE
    rules["metadata"].pop("annotations", None)  # helm's hook: no helm here
    return rules


def webhook_configurations(ca: str) -> list[dict[str, Any]]:
    """Upstream's two, pointed at the webhook process on loopback."""
    path = DWS.source() / "config" / "webhook" / "manifests.yaml"
    configurations = [c for c in yaml.safe_load_all(path.read_text()) if c]
    for configuration in configurations:
        configuration["metadata"]["name"] = f"dws-{configuration['metadata']['name']}"
        for hook in configuration["webhooks"]:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"]["url"] = f"https://127.0.0.1:{WEBHOOK_PORT}{service['path']}"
            hook["clientConfig"]["caBundle"] = ca
    return configurations


def serving(port: int, ca: Path) -> bool:
    """A TLS handshake on ``port`` verified against ``ca`` (the webhook's
    readiness probe is a ping, true before its server listens)."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw),
        ):
            return True
    except OSError:
        return False


class Dws:
    """DWS's controller and webhook running beside a LocalCluster."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.directory = cluster.workdir / "dws"
        self.health = {mode: free_port() for mode in ACCOUNTS}
        self.processes: dict[str, Process] = {}
        self.webhooks: list[dict[str, Any]] = []

    def _apply(self, objects: list[dict[str, Any]]) -> None:
        kubectl(self.cluster, "apply", "--server-side", "--force-conflicts", "-f", "-",
                stdin=yaml.safe_dump_all(objects))  # fmt: skip

    def _install(self) -> None:
        crds = [yaml.safe_load(path.read_text()) for path in crd_files()]
        for path in crd_files():  # one at a time: NnfContainerProfile's is 1.9 MB
            kubectl(self.cluster, "apply", "--server-side", "--force-conflicts", "-f", str(path))
        with self.cluster.admin() as api:
            wait_until("DWS's and NNF's CRDs established",
                       lambda: all(established(api, crd) for crd in crds), 60, [])  # fmt: skip
        self._apply(rbac())
        self._apply([ruleset()])

    def _certificates(self) -> Path:
        pair = self.cluster.ca.issue("dws-webhook", "dws-webhook", hosts=("127.0.0.1",))
        certs = self.directory / "tmp" / "k8s-webhook-server" / "serving-certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(pair.cert, certs / "tls.crt")
        shutil.copy(pair.key, certs / "tls.key")
        return self.directory / "tmp"

    def _process(self, mode: str, env: dict[str, str]) -> Process:
        account, _ = ACCOUNTS[mode]
        token = self.cluster.token(NAMESPACE, account, seconds=24 * 3600)
        kubeconfig = self.cluster.kubeconfig(f"dws-{mode}", token=token)
        binary = DWS.binary()
        assert binary is not None
        argv = [
            str(binary),
            f"--mode={mode}",
            f"--kubeconfig={kubeconfig}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.health[mode]}",
        ]
        process = Process(f"dws-{mode}", argv, self.cluster.workdir, env={**os.environ, **env})
        process.start()
        self.cluster.processes[f"dws-{mode}"] = process  # a stopped cluster stops it too
        self.processes[mode] = process
        wait_until(f"DWS's {mode} ready",
                   lambda: healthy(f"http://127.0.0.1:{self.health[mode]}/readyz"), 120,
                   [process])  # fmt: skip
        return process

    def start(self) -> Dws:
        self._install()
        tmp = self._certificates()
        webhook = self._process("webhook", {"TMPDIR": str(tmp), "POD_NAMESPACE": NAMESPACE})
        wait_until("DWS's webhook serving TLS",
                   lambda: serving(WEBHOOK_PORT, self.cluster.ca.cert), 60, [webhook])  # fmt: skip
        ca = base64.b64encode(self.cluster.ca.cert.read_bytes()).decode()
        self.webhooks = webhook_configurations(ca)
        self._apply(self.webhooks)
        self._process("controller", {})
        return self

    def log(self, mode: str, lines: int = 60) -> str:
        process = self.processes.get(mode)
        return process.tail(lines) if process is not None else ""

    def stop(self) -> None:
        """The webhooks go first (they fail closed), then both processes."""
        for configuration in self.webhooks:
            kubectl(self.cluster, "delete", "--ignore-not-found", configuration["kind"],
                    configuration["metadata"]["name"])  # fmt: skip
        for mode, process in self.processes.items():
            process.stop()
            self.cluster.processes.pop(f"dws-{mode}", None)
        shutil.rmtree(self.directory, ignore_errors=True)
