"""End to end: ``fluxhop operator`` as a real process (kopf's own aiohttp
client) against the fake API server served over HTTP on 127.0.0.1. A
MiniCluster from the operator examples is applied and its objects and status
appear; then a resize, a change it cannot take, an operator killed mid-way
and restarted (nothing lost, nothing duplicated), and a delete. Every wait
waits for the change in the fake's state, with a deadline, never for a time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluxhop.cluster.api import Kube
from tests.cluster.fakeapi import DEFAULT_CRDS, FakeAPIServer
from tests.cluster.fixtures import write_kubeconfig
from tests.cluster.httpserve import HTTPFake
from tests.conformance import CONFORMANCE, REPO
from tests.processes import default_signals

LAUNCH = "import sys; from fluxhop.cli import main; sys.exit(main())"
DEADLINE = float(os.environ.get("E2E_DEADLINE", "120"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


OPERATOR_TOKEN = "operator-token"  # the fake judges this one's requests by deploy/'s role


def deploy_rules() -> list[dict[str, Any]]:
    for doc in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text()):
        if doc and doc["kind"] == "ClusterRole":
            return list(doc["rules"])
    raise AssertionError("deploy/rbac.yaml has no ClusterRole")


class Cluster:
    def __init__(self, fake: FakeAPIServer, url: str, tmp: Path) -> None:
        self.fake = fake
        self.config = tmp / "kubeconfig"
        write_kubeconfig(self.config)  # the test's own: an admin, as kubectl would be
        self.kube = Kube.connect(str(self.config), transport=fake.transport())
        text = self.config.read_text().replace("https://fake.invalid:6443", url)
        self.config.write_text(text.replace("secret-token", OPERATOR_TOKEN))
        self.logs = tmp / "operator.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start_operator(self, priority: int | None = None, all_namespaces: bool = False) -> None:
        argv = [sys.executable, "-c", LAUNCH, "operator"]
        argv += ["--all-namespaces"] if all_namespaces else ["-n", "default"]
        argv += ["--standalone"] if priority is None else ["--priority", str(priority)]
        argv += ["--liveness", f"http://127.0.0.1:{free_port()}/healthz"]
        with open(self.logs, "ab") as log:  # the child keeps its own copy of the file
            self.process = subprocess.Popen(
                argv,
                env={**os.environ, "KUBECONFIG": str(self.config)},
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=default_signals,
            )

    def kill_operator(self, sig: int = signal.SIGKILL) -> None:
        assert self.process is not None
        self.process.send_signal(sig)
        self.process.wait(timeout=60)

    def until(self, what: str, check: Callable[[], Any]) -> Any:
        """Wait for the fake's state to satisfy ``check`` (woken on every change)."""
        with self.fake.changed:
            found = self.fake.changed.wait_for(check, timeout=DEADLINE)
        if not found:
            tail = self.logs.read_text(errors="replace")[-2000:] if self.logs.exists() else ""
            raise AssertionError(f"timed out waiting for {what}; operator log:\n{tail}")
        return found

    def status(self, name: str) -> dict[str, Any]:
        return (self.fake.store.get(("MiniCluster", "default", name)) or {}).get("status") or {}

    def condition(self, name: str, kind: str) -> str | None:
        for condition in self.status(name).get("conditions") or []:
            if condition["type"] == kind:
                return str(condition["status"])
        return None

    def job(self, name: str) -> dict[str, Any] | None:
        return self.fake.store.get(("Job", "default", name))


@pytest.fixture
def cluster(tmp_path):
    fake = FakeAPIServer()
    fake.flux_operator = False
    fake.rbac, fake.rbac_token = deploy_rules(), OPERATOR_TOKEN
    with HTTPFake(fake) as url:
        world = Cluster(fake, url, tmp_path)
        world.start_operator()
        yield world
        assert fake.refused == []  # every request the operator made, its role allowed
        if world.process is not None and world.process.poll() is None:
            world.kill_operator(signal.SIGTERM)
        world.kube.close()
    fake.close()


def example(name: str) -> dict[str, Any]:
    document = yaml.safe_load((CONFORMANCE / "operator-examples" / name).read_text())
    document["metadata"]["namespace"] = "default"
    return document


def hello_world(*, command: bool = True, **spec: Any) -> dict[str, Any]:
    """The upstream hello-world MiniCluster, interactive (its brokers stay up
    until deleted), with ``spec`` on top; ``command=False`` drops its command."""
    document = example("tests__hello-world__minicluster.yaml")
    document["spec"].update(interactive=True, **spec)
    if not command:
        document["spec"]["containers"][0].pop("command", None)
    return document


def test_the_operator_runs_minicluster_resources(cluster):
    document = hello_world(maxSize=6)  # interactive: the brokers stay up for the resize
    name = document["metadata"]["name"]
    document["spec"]["containers"][0].pop("command", None)
    cluster.kube.apply(document)
    cluster.until("the Job", lambda: cluster.job(name))
    for kind, suffix in (("ConfigMap", "-flux-config"), ("Secret", "-flux-curve"), ("Service", "")):
        cluster.until(
            kind, lambda k=kind, s=suffix: cluster.fake.store.get((k, "default", name + s))
        )
    size = document["spec"]["size"]
    cluster.until("Ready", lambda: cluster.condition(name, "Ready") == "True")
    assert cluster.status(name)["brokersUp"] == size
    assert cluster.status(name)["selector"] == f"fluxhop.io/minicluster={name}"
    key = cluster.fake.store[("Secret", "default", name + "-flux-curve")]["data"]

    cluster.kube.merge_patch("MiniCluster", name, {"spec": {"size": size + 1}})
    cluster.until(
        "the resize", lambda: (cluster.job(name) or {})["spec"]["parallelism"] == size + 1
    )
    cluster.until("status.size", lambda: cluster.status(name).get("size") == size + 1)

    cluster.kube.merge_patch(
        "MiniCluster", name, {"spec": {"containers": [{"image": "ubuntu:plucky"}]}}
    )
    cluster.until("the refusal", lambda: cluster.condition(name, "SpecApplied") == "False")
    assert cluster.fake.store[("Secret", "default", name + "-flux-curve")]["data"] == key

    cluster.kube.delete("MiniCluster", name)
    cluster.until("everything gone", lambda: not cluster.job(name))
    assert not cluster.fake.store.get(("Secret", "default", name + "-flux-curve"))


def test_an_operator_killed_mid_way_loses_and_duplicates_nothing(cluster):
    document = hello_world(maxSize=6)
    name = document["metadata"]["name"]
    document["spec"]["containers"][0].pop("command", None)
    cluster.kube.apply(document)
    cluster.until("the Job", lambda: cluster.job(name))
    cluster.kill_operator()  # somewhere between the Job and its last child, or after
    cluster.start_operator()
    cluster.until("Ready after the restart", lambda: cluster.condition(name, "Ready") == "True")
    kinds = [
        k for (k, ns, n) in cluster.fake.store if ns == "default" and k != "Event" and k != "Pod"
    ]
    assert sorted(kinds) == [
        "ConfigMap",
        "Job",
        "MiniCluster",
        "NetworkPolicy",
        "Secret",
        "Service",
    ]
    secret = cluster.fake.store[("Secret", "default", name + "-flux-curve")]
    cluster.kill_operator(signal.SIGTERM)
    cluster.start_operator()  # resumes a settled resource: nothing to write
    size = document["spec"]["size"]
    cluster.kube.merge_patch("MiniCluster", name, {"spec": {"size": size + 1}})
    cluster.until(
        "the resize", lambda: (cluster.job(name) or {})["spec"]["parallelism"] == size + 1
    )
    assert (
        cluster.fake.store[("Secret", "default", name + "-flux-curve")] == secret
    )  # never rotated
    jobs = [n for (k, ns, n) in cluster.fake.store if k == "Job"]
    assert jobs == [name]


@pytest.fixture
def replicas(tmp_path):
    """Two operators peering in namespace default (kopf's KopfPeering, which
    no one made: the operators make it, and of their two creates one wins)."""
    fake = FakeAPIServer(crds=DEFAULT_CRDS | {"KopfPeering"})
    fake.flux_operator = False
    fake.rbac, fake.rbac_token = deploy_rules(), OPERATOR_TOKEN
    with HTTPFake(fake) as url:
        world = Cluster(fake, url, tmp_path)
        (tmp_path / "low").mkdir()
        low = Cluster(fake, url, tmp_path / "low")

        def peers() -> dict[str, Any]:
            found = fake.store.get(("KopfPeering", "default", "fluxhop-operator")) or {}
            return dict(found.get("status") or {})

        # the high one in the peering before the low one starts: the low one
        # then sees it at its first look and stands by from the start (a
        # replica that has not seen its peer yet works as if alone)
        world.start_operator(priority=20)
        world.until("the high replica in the peering", lambda: len(peers()) == 1)
        low.start_operator(priority=10)
        world.until("both replicas in the peering", lambda: len(peers()) == 2)
        yield world, low
        assert fake.refused == []
        for each in (world, low):
            if each.process is not None and each.process.poll() is None:
                each.kill_operator(signal.SIGTERM)
            each.kube.close()
    fake.close()


def test_two_replicas_do_the_work_once_and_the_standby_takes_over(replicas):
    high, low = replicas
    document = hello_world(command=False)
    name = document["metadata"]["name"]
    high.kube.apply(document)
    high.until("Ready", lambda: high.condition(name, "Ready") == "True")
    created = [
        o for (k, _, _), o in high.fake.store.items() if k == "Event" and o["reason"] == "Created"
    ]
    assert len(created) == 1
    secrets = [o for (k, _, _), o in high.fake.store.items() if k == "Secret"]
    assert len(secrets) == 1 and secrets[0]["metadata"]["resourceVersion"]  # made once
    assert "Handler '" not in low.logs.read_text()  # the standby handled nothing
    high.kill_operator(signal.SIGTERM)  # leaves the peering; the standby resumes
    second = {**document, "metadata": {**document["metadata"], "name": "second"}}
    low.kube.apply(second)
    low.until("the standby's Job", lambda: low.job("second"))
    assert "Resuming operations after the pause" in low.logs.read_text()


def test_all_namespaces_with_cluster_peering(tmp_path):
    """The deployed mode: -A, peering through the ClusterKopfPeering, which
    the operator makes at start (deploy/ cannot ship it beside its CRD)."""
    fake = FakeAPIServer(crds=DEFAULT_CRDS | {"ClusterKopfPeering"})
    fake.flux_operator = False
    fake.rbac, fake.rbac_token = deploy_rules(), OPERATOR_TOKEN
    with HTTPFake(fake) as url:
        world = Cluster(fake, url, tmp_path)
        world.start_operator(priority=5, all_namespaces=True)
        try:
            document = hello_world(command=False)
            name = document["metadata"]["name"]
            world.kube.apply(document)
            world.until("Ready", lambda: world.condition(name, "Ready") == "True")
            world.until(  # it announced itself to its peers, cluster-wide
                "the operator in the peering",
                lambda: fake.store[("ClusterKopfPeering", "", "fluxhop-operator")].get("status"),
            )
        finally:
            world.kill_operator(signal.SIGTERM)
            world.kube.close()
    assert fake.refused == []
    fake.close()
