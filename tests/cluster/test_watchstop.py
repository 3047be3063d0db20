"""A stopped watch ends at once, though nothing changes, and gives its
connection back (fluxhop/cluster/watchstop.py): over real HTTP, as a
long-lived client (a workload manager's) waits for MiniCluster after
MiniCluster."""

from __future__ import annotations

import threading

import pytest
import yaml

from fluxhop.cluster.api import Kube
from fluxhop.cluster.watchstop import WatchStop
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.fixtures import eventually, write_kubeconfig
from tests.cluster.httpserve import HTTPFake

POOL = 100  # httpx's connections per client


@pytest.fixture
def served(tmp_path):
    fake = FakeAPIServer()
    with HTTPFake(fake) as url:
        path = write_kubeconfig(tmp_path / "kubeconfig")
        config = yaml.safe_load(path.read_text())
        config["clusters"][0]["cluster"]["server"] = url
        path.write_text(yaml.safe_dump(config))
        kube = Kube.connect(str(path), request_timeout=10)
        try:
            yield fake, kube
        finally:
            kube.close()
    fake.close()


def watching(fake, kube, stop):
    """A watch of pods nobody changes, read on a thread of its own, once the
    server has its request."""
    before = len(fake.seen("WATCH"))
    thread = threading.Thread(target=lambda: list(kube.watch("Pod", stop=stop)), daemon=True)
    thread.start()
    eventually(lambda: len(fake.seen("WATCH")) > before)
    return thread


def test_a_stopped_watch_ends_at_once_though_nothing_changes(served):
    fake, kube = served
    stop = WatchStop()
    thread = watching(fake, kube, stop)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert len(fake.seen("WATCH")) == 1  # ended, not reconnected


def test_more_waits_than_the_pool_holds_leave_the_client_usable(served):
    fake, kube = served
    for _ in range(POOL + 10):
        stop = WatchStop()
        thread = watching(fake, kube, stop)
        stop.set()
        thread.join(10)
        assert not thread.is_alive()
    assert kube.get("Pod", "nobody") is None  # a connection was there for it


def test_a_watch_without_a_stop_is_read_as_before(served):
    fake, kube = served
    events = kube.watch("ConfigMap")
    fake.seed("ConfigMap", {"metadata": {"name": "seen"}, "data": {}})
    event, obj = next(events)
    assert (event, obj["metadata"]["name"]) == ("ADDED", "seen")
    events.close()
