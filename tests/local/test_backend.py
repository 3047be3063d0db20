"""fluxhop.Client(backend="local") with the stand-in flux."""

from __future__ import annotations

import pytest

import fluxhop
from fluxhop.errors import InputError, NotFound
from tests.local.fakeflux import job


def test_create_wait_logs_delete(fake_flux):
    fake_flux.set(FAKE_SIZE=2)
    with fluxhop.Client(backend="local") as client:
        name = client.create(job(["sh", "-c", "echo out; exit 4"], nodes=2))
        status = client.wait(name, timeout=30)
        assert (status.state, status.exit_code, status.size, status.target) == (
            "Failed",
            4,
            2,
            "local",
        )
        assert list(client.logs(name)) == ["out\n"]
        assert [s.name for s in client.list()] == ["demo"]
        client.delete(name)
        with pytest.raises(NotFound):
            client.get(name)
    assert fake_flux.all_gone()


def test_close_stops_what_is_still_running(fake_flux):
    fake_flux.set(FAKE_SIZE=1)
    client = fluxhop.Client(backend="local")
    client.create(job(["sleep", "60"], nodes=1))
    assert client.get("demo").state == "Running"
    client.close()
    assert fake_flux.all_gone()


def test_local_has_no_kubernetes_verbs(fake_flux):
    with fluxhop.Client(backend="local") as client:
        with pytest.raises(InputError, match="cannot be resized"):
            client.scale("x", 2)
        with pytest.raises(InputError, match="no Kubernetes operations"):
            client.ops  # noqa: B018
        assert client.namespace == "local"


def test_unknown_backend():
    with pytest.raises(InputError, match="backend 'slurm'"):
        fluxhop.Client(backend="slurm")
