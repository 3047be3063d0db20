"""fluxhop.Client: the Python API, against the fake API server."""

from __future__ import annotations

import pytest

import fluxhop
from fluxhop.errors import InputError, NotFound
from tests.conformance import REPO
from tests.documents import minicluster_doc

SPEC = minicluster_doc(
    "api-demo",
    size=2,
    maxSize=3,
    tasks=2,
    containers=[{"image": "ubuntu", "command": "hostname"}],
)


@pytest.fixture
def client(fake, kubeconfig):
    with fluxhop.Client(kubeconfig=str(kubeconfig), transport=fake.transport()) as api:
        yield api


def test_create_wait_logs_get_list_scale_delete(client, fake):
    fake.runner = lambda pod, index: (["out\n"], 0)
    name = client.create(SPEC)
    assert name == "api-demo" and client.namespace == "default"
    status = client.wait(name, timeout=30)
    assert (status.state, status.exit_code, status.size, status.max_size) == ("Succeeded", 0, 2, 3)
    assert list(client.logs(name)) == ["out\n"]
    assert [s.name for s in client.list()] == ["api-demo"]
    assert client.get(name).target == "job"
    client.delete(name)
    assert fake.objects() == []
    with pytest.raises(NotFound):
        client.get(name)


def test_create_accepts_a_model_a_file_and_yaml_text(client, fake):
    from fluxhop.spec import MiniCluster

    assert client.create(MiniCluster.from_dict(SPEC)) == "api-demo"
    assert client.create(str(REPO / "examples" / "lammps.yaml")) == "lammps"
    assert (
        client.create(
            "metadata: {name: texty}\nspec: {containers: [{image: x, command: hostname}]}"
        )
        == "texty"
    )
    assert {o["metadata"]["name"] for o in fake.objects(kinds=("Job",))} == {
        "api-demo",
        "lammps",
        "texty",
    }


def test_scale(client, fake):
    fake.runner = lambda pod, index: None  # the brokers run: a finished one is not resized
    client.create(SPEC)
    assert client.scale("api-demo", 3).size == 3
    with pytest.raises(InputError, match="maxSize 3"):
        client.scale("api-demo", 4)


def test_a_server_never_reached_is_said_at_once(kubeconfig):
    """A refused first contact ends in seconds, naming the kubeconfig (the
    request timeout is for a server that answered once and went away)."""
    import httpx2

    from fluxhop.errors import Unreachable

    def refuse(request):
        raise httpx2.ConnectError("connection refused", request=request)

    refusing = httpx2.MockTransport(refuse)
    with (
        fluxhop.Client(kubeconfig=str(kubeconfig), transport=refusing) as api,
        pytest.raises(Unreachable, match=f"context fake of {kubeconfig}"),
    ):
        api.list()


def test_unknown_backend():
    with pytest.raises(InputError, match="backend"):
        fluxhop.Client(backend="slurm")


def test_both_backends_are_the_one_interface(fake, kubeconfig):
    """Client has no branch per backend: each verb goes to a Backend, and both
    implementations have every method of the Protocol."""
    import inspect

    from fluxhop.cluster.backend import KubernetesBackend
    from fluxhop.local.backend import LocalMiniClusters
    from fluxhop.workload.backend import Backend

    wanted = {n for n, _ in inspect.getmembers(Backend) if not n.startswith("_")}
    for implementation in (KubernetesBackend, LocalMiniClusters):
        assert wanted <= set(dir(implementation)), implementation
    with fluxhop.Client(kubeconfig=str(kubeconfig), transport=fake.transport()) as api:
        assert isinstance(api.backend, KubernetesBackend)
    with fluxhop.Client(backend="local") as local:
        assert isinstance(local.backend, LocalMiniClusters) and local.namespace == "local"
    source = inspect.getsource(fluxhop.Client)
    assert "_local" not in source  # no per-method branch on the backend


def test_replace_without_the_operator_is_said(client, fake):
    from fluxhop.errors import FluxhopWarning

    health = {"onFailure": "replace", "checks": [{"name": "a", "command": "true"}]}
    with pytest.warns(FluxhopWarning, match=r"^spec.health.onFailure replace: only fluxhop's "):
        client.create({**SPEC, "spec": {**SPEC["spec"], "health": health}})
