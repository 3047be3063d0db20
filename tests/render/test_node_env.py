"""Node-local variables: which ones a spec has, and the job shell's rc that
gives each pod's tasks its own values (run here by a real Lua with a
stand-in for flux-shell's ``shell`` table; tests/local/test_real_flux.py
runs it in real job shells)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.flux.curve import CurveCert
from fluxhop.render.bundle import Layout, build_bundle, node_local_names
from fluxhop.render.scripts import PodPaths
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc

LUA = shutil.which("lua5.3") or shutil.which("lua5.4") or shutil.which("lua")
CERT = CurveCert.generate("nodeenv")
LAYOUT = Layout(host_prefix="ne-", subdomain="ne", namespace="default")


def spec(environment: dict[str, str]) -> MiniCluster:
    container = {"image": "ubuntu:noble", "command": "true", "environment": environment}
    return MiniCluster.from_dict(minicluster_doc("ne", size=2, containers=[container]))


def test_the_node_name_and_whatever_is_defined_from_it():
    names = node_local_names(spec({
        "RACK": "r-$(NNF_NODE_NAME)",  # through another node-local one
        "NNF_NODE_NAME": "$(FLUXHOP_NODE_NAME)",
        "SAME": "everywhere",
    }))  # fmt: skip
    assert names == ["FLUXHOP_NODE_NAME", "NNF_NODE_NAME", "RACK"]


def test_a_name_no_shell_can_hold_is_said_and_left_out():
    with pytest.warns(FluxhopWarning, match=r"environment variable my\.node differs from pod"):
        names = node_local_names(spec({"my.node": "$(FLUXHOP_NODE_NAME)"}))
    assert names == ["FLUXHOP_NODE_NAME"]


@pytest.mark.parametrize(
    ("paths", "where", "rc_dir"),
    [(PodPaths(), "shell/node-env.lua", "shell"),
     (PodPaths(config_dir="/etc/flux-config", flat=True), "node-env.lua", "")],
)  # fmt: skip
def test_the_rc_sits_alone_where_flux_shell_rc_path_points(paths, where, rc_dir):
    bundle = build_bundle(spec({}), LAYOUT, CERT, paths=paths)
    assert bundle.config_paths["node-env.lua"] == where
    # every *.lua in that directory is sourced: this one only
    in_dir = [p for p in bundle.config_paths.values() if os.path.dirname(p) == rc_dir]
    assert [p for p in in_dir if p.endswith(".lua")] == [where]
    assert f"shell_subdir={shlex.quote(rc_dir)}" in bundle.config_files["entrypoint.sh"]


@pytest.fixture
def run_rc(tmp_path):
    if LUA is None:
        pytest.skip("no Lua interpreter here")
    rooted = spec({})  # the pods' Flux root: tmp_path/pod
    rooted.spec.flux.container.mount_path = str(tmp_path / "pod")
    rc = tmp_path / "node-env.lua"
    rc.write_text(build_bundle(rooted, LAYOUT, CERT).config_files["node-env.lua"])
    stub = tmp_path / "stub.lua"
    stub.write_text('shell = {setenv = function (k, v) io.write (k, "=", v, "\\n") end}\n'
                    f"dofile ({str(rc)!r})\n")  # fmt: skip

    def run(uri: str) -> list[str]:
        env = {"PATH": os.environ["PATH"], "FLUX_URI": uri}
        out = subprocess.run([LUA, str(stub)], env=env, capture_output=True, text=True, check=True)
        return out.stdout.splitlines()

    return run


def test_the_rc_sets_what_the_pods_entrypoint_wrote(run_rc, tmp_path):
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    (run / "node.env").write_text("FLUXHOP_NODE_NAME=rabbit-b\nPAIR=a=b\nEMPTY=\nnot a line\n")
    got = run_rc(f"local://{run}/broker/local-3")
    assert got == ["FLUXHOP_NODE_NAME=rabbit-b", "PAIR=a=b", "EMPTY="]


def test_an_instance_inside_a_job_reads_the_pods_file(run_rc, tmp_path):
    # its brokers' sockets are elsewhere: the pod's Flux root is looked in
    nested = "local:///tmp/flux-abc/local-0"
    assert run_rc(nested) == []  # no file there yet: nothing set
    (tmp_path / "pod" / "run").mkdir(parents=True)
    (tmp_path / "pod" / "run" / "node.env").write_text("FLUXHOP_NODE_NAME=rabbit-a\n")
    assert run_rc(nested) == ["FLUXHOP_NODE_NAME=rabbit-a"]


def test_the_rc_is_rendered_with_the_pods_flux_root():
    text = build_bundle(spec({}), LAYOUT, CERT).config_files["node-env.lua"]
    assert "local default_run = [[/mnt/flux/run]]" in text.splitlines()
