"""The controllers fluxhop runs beside, on the test cluster: JobSet, Kueue and
Kubeflow Trainer, each built from its own release (tests/realk8s/go/<name>)
and started as a process against the cluster's API server, with the CRDs,
ServiceAccount and RBAC of its own module's manifests.

What differs from an in-cluster install, and why: there is no kube-proxy, so
the API server reaches their webhooks (and Kueue's CRD conversions) at
``https://127.0.0.1:<port><path>`` instead of through a Service, with a
serving certificate from the cluster's CA (their own certificate management
is off: it would mint certificates for ``<svc>.<ns>.svc``); leader election
is off (one replica); metrics are off; Kueue's visibility API is off (an
APIService nobody serves breaks discovery, and with it namespace deletion).
Kueue's pod, Deployment and StatefulSet webhooks (no-ops with those
integrations off, yet fail-closed for every pod) are left out, and its Job
webhooks see only Jobs with a queue label (what it manages when
``manageJobsWithoutQueueName`` is false). Each authenticates with a token of
its own ServiceAccount, so its RBAC is what the API server enforces.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.realk8s.binaries import GO_DIR
from tests.realk8s.cluster import ClusterError, LocalCluster, free_port, healthy, wait_until
from tests.realk8s.processes import Process
from tests.realk8s.tools import kubectl

__all__ = ["CONTROLLERS", "Controller", "Running", "established", "module_dir"]

KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")  # hard-coded in cmd/kueue (not configurable)
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
NAMESPACED = (
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
    "ConfigMap",
    "Secret",
)
INSTALLED_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
)


def module_dir(name: str, module: str) -> Path:
    """Where the Go module cache keeps the release the build used (its
    manifests: CRDs, RBAC, webhooks)."""
    gomod = (GO_DIR / name / "go.mod").read_text()
    found = re.search(rf"^\s*{re.escape(module)} (v\S+)", gomod, re.M)
    if found is None:
        raise ClusterError(f"{GO_DIR / name / 'go.mod'} does not require {module}")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    done = subprocess.run(["go", "mod", "download", "-json", f"{module}@{found.group(1)}"],
                          cwd=GO_DIR / name, env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return Path(json.loads(done.stdout)["Dir"])


@dataclass(frozen=True)
class Controller:
    """How one controller is installed and started."""

    program: str  # the binary tests/realk8s/build.py made
    gomod: str  # its module under tests/realk8s/go/
    module: str  # the controller's Go module
    kustomization: (
        str | tuple[str, ...]
    )  # the directory (or directories) in that module holding its manifests
    namespace: str
    account: str
    config: Callable[
        [int, int, Path], dict[str, Any]
    ]  # (webhook port, health port, cert dir) -> config
    webhook: Callable[[str], bool] = lambda name: True  # which webhooks to install
    narrow: dict[str, dict[str, Any]] = field(default_factory=dict)  # webhook -> objectSelector
    cert_env: str | None = None  # an environment variable that points at its cert dir's parent


def _jobset(port: int, health: int, certs: Path) -> dict[str, Any]:
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
    }


def _kueue(port: int, health: int, certs: Path) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "featureGates": {"VisibilityOnDemand": False, "MultiKueue": False},
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
    }


def _trainer(port: int, health: int, certs: Path) -> dict[str, Any]:
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {
            "host": "127.0.0.1",
            "port": port,
        },  # certs: $TMPDIR/k8s-webhook-server/serving-certs
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "certManagement": {"enable": False},
    }


QUEUED = {"matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]}
KUEUE_WEBHOOKS = {
    "jobset",
    "job",
    "clusterqueue",
    "cohort",
    "resourceflavor",
    "workload",
    "localqueue",
}
CONTROLLERS = {
    "jobset": Controller(
        "jobset", "jobset", "sigs.k8s.io/jobset", "config/default", "jobset-system",
        "jobset-controller-manager", _jobset,
    ),
    "kueue": Controller(
        "kueue", "kueue", "sigs.k8s.io/kueue", "config/default", "kueue-system",
        "kueue-controller-manager", _kueue,
        webhook=lambda name: name[1:].split(".")[0] in KUEUE_WEBHOOKS,
        narrow={"mjob.kb.io": QUEUED, "vjob.kb.io": QUEUED},
    ),
    "trainer": Controller(
        "trainer-controller-manager", "trainer", "github.com/kubeflow/trainer/v2",
        ("manifests/base/crds", "manifests/base/rbac", "manifests/base/webhook"),
        "kubeflow-system", "kubeflow-trainer-controller-manager", _trainer, cert_env="TMPDIR",
    ),
}  # fmt: skip


def established(api: Any, crd: dict[str, Any]) -> bool:
    found = api.get(
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    )
    conditions = found.get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _to_url(config: dict[str, Any], port: int, ca: str) -> None:
    service = config.pop("service")
    config["url"] = f"https://127.0.0.1:{port}{service.get('path', '/')}"
    config["caBundle"] = ca


class Running:
    """One controller, installed on and running beside a LocalCluster."""

    def __init__(self, cluster: LocalCluster, controller: Controller) -> None:
        self.cluster, self.controller = cluster, controller
        self.directory = cluster.workdir / "controllers" / controller.gomod
        self.port, self.health = free_port(), free_port()
        self.process: Process | None = None
        self.webhooks: list[dict[str, Any]] = []
        self.made: Path | None = (
            None  # what it made outside the cluster's directory (Kueue's certs)
        )

    # --- the manifests ------------------------------------------------------------
    def objects(self) -> list[dict[str, Any]]:
        """Its manifests, rendered by kustomize (kubectl's) from its module:
        one directory, or several (Trainer's overlay would fetch JobSet from
        the internet), whose objects are then put in its namespace."""
        c = self.controller
        root = module_dir(c.gomod, c.module)
        dirs = (c.kustomization,) if isinstance(c.kustomization, str) else c.kustomization
        objects = []
        for directory in dirs:
            text = subprocess.run([str(self.cluster.bin / "kubectl"), "kustomize", str(root / directory)],
                                  capture_output=True, text=True, check=True).stdout  # fmt: skip
            objects += [doc for doc in yaml.safe_load_all(text) if doc]
        for obj in objects:
            if obj["kind"] in NAMESPACED and not obj["metadata"].get("namespace"):
                obj["metadata"]["namespace"] = c.namespace
            for subject in obj.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount" and not subject.get("namespace"):
                    subject["namespace"] = c.namespace
        if not any(o["kind"] == "Namespace" for o in objects):
            objects.append(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.namespace}}
            )
        return objects

    def _crds(self, objects: list[dict[str, Any]], ca: str) -> list[dict[str, Any]]:
        crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
        for crd in crds:
            conversion = crd["spec"].get("conversion") or {}
            if conversion.get("strategy") != "Webhook":
                continue
            if len(crd["spec"]["versions"]) == 1:
                crd["spec"]["conversion"] = {
                    "strategy": "None"
                }  # never called (JobSet's: not even served)
            else:
                _to_url(conversion["webhook"]["clientConfig"], self.port, ca)
        return crds

    def _webhooks(self, objects: list[dict[str, Any]], ca: str) -> list[dict[str, Any]]:
        c = self.controller
        out = []
        for config in [o for o in objects if o["kind"] in WEBHOOK_KINDS]:
            config["webhooks"] = [w for w in config["webhooks"] if c.webhook(w["name"])]
            for hook in config["webhooks"]:
                _to_url(hook["clientConfig"], self.port, ca)
                if hook["name"] in c.narrow:
                    hook["objectSelector"] = c.narrow[hook["name"]]
            config["metadata"].pop("annotations", None)  # cert-manager's CA injection: not here
            if config["webhooks"]:
                out.append(config)
        return out

    def _apply(self, objects: list[dict[str, Any]]) -> None:
        if objects:
            kubectl(self.cluster, "apply", "--server-side", "--force-conflicts", "-f", "-",
                                 stdin=yaml.safe_dump_all(objects))  # fmt: skip

    # --- running ----------------------------------------------------------------------
    def _certificates(self) -> Path:
        pair = self.cluster.ca.issue(
            f"{self.controller.gomod}-webhook", self.controller.gomod, hosts=("127.0.0.1",)
        )
        if self.controller.cert_env:
            certs = self.directory / "tmp" / "k8s-webhook-server" / "serving-certs"
        else:
            certs = self.directory / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(pair.cert, certs / "tls.crt")
        shutil.copy(pair.key, certs / "tls.key")
        if self.controller.gomod == "kueue" and not KUEUE_METRICS_CERTS.exists():
            top = KUEUE_METRICS_CERTS
            while not top.parent.exists():
                top = top.parent  # the first directory this makes, and removes again
            KUEUE_METRICS_CERTS.mkdir(parents=True)
            shutil.copy(pair.cert, KUEUE_METRICS_CERTS / "tls.crt")
            shutil.copy(pair.key, KUEUE_METRICS_CERTS / "tls.key")
            self.made = top
        return certs

    def start(self) -> Running:
        c, cluster = self.controller, self.cluster
        ca = base64.b64encode(cluster.ca.cert.read_bytes()).decode()
        objects = self.objects()
        crds = self._crds(objects, ca)
        self._apply(crds)
        with cluster.admin() as api:
            wait_until(
                "its CRDs established", lambda: all(established(api, crd) for crd in crds), 60, []
            )
        installed = [o for o in objects if o["kind"] in INSTALLED_KINDS]
        self._apply(
            sorted(installed, key=lambda o: o["kind"] != "Namespace")
        )  # its namespace first
        certs = self._certificates()
        token = cluster.token(c.namespace, c.account, seconds=24 * 3600)
        kubeconfig = cluster.kubeconfig(c.gomod, token=token)
        config = self.directory / "config.yaml"
        config.write_text(yaml.safe_dump(c.config(self.port, self.health, certs)))
        env = {**os.environ}
        if c.cert_env:
            env[c.cert_env] = str(self.directory / "tmp")
        argv = [
            str(cluster.bin / c.program),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            "--zap-log-level=2",
        ]
        self.process = Process(c.gomod, argv, cluster.workdir, env=env).start()
        cluster.processes[c.gomod] = self.process  # a stopped cluster stops it too
        wait_until(f"{c.gomod} ready", lambda: healthy(f"http://127.0.0.1:{self.health}/readyz"), 180,
              [self.process])  # fmt: skip
        self.webhooks = self._webhooks(objects, ca)
        self._apply(self.webhooks)
        return self

    def stop(self) -> None:
        """Its webhooks go first: they fail closed, and would block what
        the cluster does without the controller."""
        for config in self.webhooks:
            kubectl(
                self.cluster,
                "delete",
                "--ignore-not-found",
                config["kind"],
                config["metadata"]["name"],
            )
        if self.process is not None:
            self.process.stop()
        if self.made is not None:
            shutil.rmtree(self.made, ignore_errors=True)
