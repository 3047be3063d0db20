"""Fixtures: a fake API server, a kubeconfig pointing at it, and clients."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from tests.cluster.fakeapi import FakeAPIServer
from tests.conformance import REPO

SERVER = "https://fake.invalid:6443"


def write_kubeconfig(path: Path, *, namespace: str = "default", context: str = "fake") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": context,
                "clusters": [{"name": "fake", "cluster": {"server": SERVER}}],
                "users": [{"name": "tester", "user": {"token": "secret-token"}}],
                "contexts": [
                    {
                        "name": context,
                        "context": {"cluster": "fake", "user": "tester", "namespace": namespace},
                    }
                ],
            }
        )
    )
    return path


def eventually(holds, timeout: float = 30) -> None:
    """Until ``holds()``: for what the fake does on its controller thread or
    a request records (neither always notifies ``fake.changed``)."""
    deadline = time.monotonic() + timeout
    while not holds():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def foreign_job(name: str, namespace: str = "default") -> dict:
    """A Job someone else made (no fluxhop labels), for "leave it alone" tests."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
            }
        },
    }


@pytest.fixture
def fake():
    server = FakeAPIServer()
    yield server
    server.close()


def seed_lead_state_policy(fake: FakeAPIServer) -> None:
    """deploy/lead-state.yaml's policy, as an admin applies it (the fake does not run it)."""
    policy = next(yaml.safe_load_all((REPO / "deploy" / "lead-state.yaml").read_text()))
    fake.seed("MutatingAdmissionPolicy", {"metadata": policy["metadata"]}, namespace="")


def seed_storage_class(fake: FakeAPIServer, name: str, *, default: bool) -> None:
    annotations = {"storageclass.kubernetes.io/is-default-class": str(default).lower()}
    fake.seed("StorageClass", {"metadata": {"name": name, "annotations": annotations},
                               "provisioner": "example.com/disk"}, namespace="")  # fmt: skip


@pytest.fixture
def lead_state_policy(fake):
    seed_lead_state_policy(fake)


@pytest.fixture
def kubeconfig(tmp_path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def kube(fake, kubeconfig, sleeps) -> Kube:
    client = Kube.connect(str(kubeconfig), transport=fake.transport(), sleep=sleeps.append)
    yield client
    client.close()


@pytest.fixture
def ops(kube) -> MiniClusters:
    return MiniClusters(kube)


@pytest.fixture
def cli_cluster(fake, monkeypatch, sleeps):
    """Make every Kube.connect of the CLI talk to the fake server."""
    original = Kube.connect.__func__

    def connect(cls, kubeconfig=None, context=None, namespace=None, **options):
        options.setdefault("transport", fake.transport())
        options.setdefault("sleep", sleeps.append)
        return original(cls, kubeconfig, context, namespace, **options)

    monkeypatch.setattr(Kube, "connect", classmethod(connect))
    return fake


@pytest.fixture
def rank0(fake):
    """Rank 0's answers to execs (tests/cluster/rank0.py); the brokers run until stopped."""
    from tests.cluster.fakeexec import exec_through_fake
    from tests.cluster.rank0 import Rank0

    answers = Rank0()
    fake.runner = lambda pod, index: None
    fake.exec_runner = answers.execute
    with exec_through_fake():
        yield answers
