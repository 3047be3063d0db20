"""The bundle rewritten for N brokers on one host (pure: ports and paths in)."""

from __future__ import annotations

import json
import tomllib

import pytest

from fluxhop.errors import SpecError
from fluxhop.flux.curve import CurveCert
from fluxhop.render.localhost import LocalLayout, local_bundle
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.minicluster import MiniCluster

CERT = CurveCert.generate("demo")
PORTS = [41001, 41002, 41003, 41004]


def bundle(command=("hostname",), nodes=4, tasks=8, root="/tmp/fluxhop-x", **kwargs):
    spec = minicluster_from_flags(
        list(command), image="x", nodes=nodes, tasks=tasks, name="demo", **kwargs
    )
    return local_bundle(spec, LocalLayout(root, "demo", nodes), PORTS[:nodes], CERT)


def test_one_hosts_entry_per_rank_on_loopback():
    broker = tomllib.loads(bundle().config_files["broker.toml"])
    assert broker["bootstrap"]["hosts"] == [
        {"host": f"demo-{i}", "bind": f"tcp://127.0.0.1:{p}", "connect": f"tcp://127.0.0.1:{p}"}
        for i, p in enumerate(PORTS)
    ]
    assert broker["bootstrap"]["curve_cert"] == "/tmp/fluxhop-x/curve/curve.cert"
    assert (
        "default_bind" not in broker["bootstrap"] and "default_connect" not in broker["bootstrap"]
    )
    assert broker["resource"] == {"path": "/tmp/fluxhop-x/config/R", "noverify": True}


def test_r_gives_each_rank_enough_cores_for_its_tasks():
    r = json.loads(bundle(nodes=2, tasks=6).config_files["R"])
    assert r["execution"]["R_lite"] == [{"rank": "0-1", "children": {"core": "0-2"}}]
    assert r["execution"]["nodelist"] == ["demo-[0-1]"]


def test_the_view_is_off_and_the_entrypoint_uses_local_paths():
    entrypoint = bundle().config_files["entrypoint.sh"]
    assert "view_enabled=0" in entrypoint
    assert "default_config_dir=/tmp/fluxhop-x/config" in entrypoint
    assert "detect_cores=0" in entrypoint
    assert "init.sh" not in bundle().config_files


def test_args_are_not_kubernetes_escaped():
    assert bundle(command=("echo", "$HOME", "$$")).container_args == ["echo", "$HOME", "$$"]


def test_max_size_is_dropped_locally():
    spec = minicluster_from_flags(["x"], image="x", nodes=2, name="demo", max_size=6)
    b = local_bundle(spec, LocalLayout("/tmp/r", "demo", 2), PORTS[:2], CERT)
    assert len(tomllib.loads(b.config_files["broker.toml"])["bootstrap"]["hosts"]) == 2


def test_socket_paths_too_long_are_refused():
    with pytest.raises(SpecError, match="longer than 100 bytes"):
        bundle(root="/tmp/" + "x" * 80)


def test_one_port_per_rank():
    spec = MiniCluster.from_dict(
        {"metadata": {"name": "demo"}, "spec": {"size": 2, "containers": [{"image": "x"}]}}
    )
    with pytest.raises(SpecError, match="one port per rank"):
        local_bundle(spec, LocalLayout("/tmp/r", "demo", 2), [1], CERT)
