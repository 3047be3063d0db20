"""The CLI with fluxhop's operator in the cluster: `create --target
minicluster` makes the resource, the operator runs it, and get, logs, scale,
shell and delete act on it as on any MiniCluster."""

from __future__ import annotations

import pytest

from fluxhop.cli import main
from fluxhop.cli.connect import shell_argv
from fluxhop.operator.reconcile import Reconciler
from tests.operator.test_reconcile import settle


@pytest.fixture
def operated(cli_cluster):
    cli_cluster.flux_operator = False  # fluxhop's operator, not the Flux Operator, runs them
    return cli_cluster


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_create_target_minicluster_then_the_verbs(operated, kubeconfig, capsys, ops):
    config = ["--kubeconfig", kubeconfig]
    code, _, err = cli(
        capsys, "create", *config, "--name", "demo", "-N", "2", "--max-size", "3",
        "--image", "ubuntu", "--target", "minicluster", "--no-wait",
    )  # fmt: skip
    assert code == 0, err
    reconciler = Reconciler(ops)
    reconciler.reconcile(operated.get("MiniCluster", "demo"))
    settle(operated, reconciler)
    code, out, err = cli(capsys, "get", "demo", *config)
    assert code == 0, err
    assert out.split("\n")[1].split()[:4] == ["demo", "minicluster", "2", "Running"]
    root = ops.require("demo")
    argv = shell_argv("kubectl", [], root, "demo-0-x")
    assert argv[-2:] == [
        "bash",
        f"{root.config_dir}/connect.sh",
    ]  # fluxhop's pods, fluxhop's script
    code, _, err = cli(capsys, "scale", "demo", "--size", "3", *config)
    assert code == 0, err
    reconciler.reconcile(operated.get("MiniCluster", "demo"))
    assert operated.get("Job", "demo")["spec"]["parallelism"] == 3
    code, _, err = cli(capsys, "delete", "demo", *config)
    assert code == 0, err
    assert [o for o in operated.objects() if o["kind"] != "Event"] == []
