"""fluxhop autoscale's flags: a bad one is one line, before anything is asked
of a cluster (the verb itself: tests/realk8s/test_autoscale.py)."""

from __future__ import annotations

import pytest

from fluxhop.cli import main


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--scale-down-delay", "-1"],
            "--scale-down-delay': '-1': give a number of seconds at least 0",
        ),
        (["--interval", "0"], "--interval': '0': give a number of seconds more than 0"),
    ],
)
def test_bad_flags_are_one_line_before_anything_is_asked(capsys, args, says):
    code = main(["autoscale", "work", "--kubeconfig", "/nonexistent", *args])
    err = capsys.readouterr().err
    assert code != 0 and says in err and err.count("\n") == 1, err


@pytest.fixture
def work(fake, cli_cluster, kubeconfig, ops, tmp_path):
    """A MiniCluster fluxhop created, of size 4 (maxSize 4), rank 0 answering
    through lightkube's exec; kubectl is not needed."""
    from fluxhop.spec import MiniCluster
    from tests.cluster.fakeexec import exec_through_fake
    from tests.cluster.rank0 import Rank0
    from tests.cluster.test_inside import interactive

    rank0 = Rank0()
    fake.runner = lambda pod, index: None
    fake.exec_runner = rank0.execute
    doc = interactive("work", str(tmp_path / "flux")).to_dict()
    doc["spec"].update(size=4, maxSize=4, autoscale={"scaleDownDelaySeconds": 300})
    ops.wait_ready(ops.create(MiniCluster.from_dict(doc)), timeout=60)
    with exec_through_fake():
        yield rank0


def test_once_says_the_decision_and_the_time_left(work, kubeconfig, capsys, monkeypatch):
    from tests.cluster.rank0 import metrics

    monkeypatch.setenv("PATH", "/nonexistent")  # no kubectl: the API's exec
    work.now = metrics(allocated="0")
    assert main(["autoscale", "work", "--kubeconfig", str(kubeconfig), "--once"]) == 0
    out = capsys.readouterr().out
    assert (
        out
        == "minicluster/work size 4: 3 node(s) idle; shrinking to 1 once idle for 300s (in 300s)\n"
    )


def test_a_resource_the_operator_autoscales_is_refused(fake, cli_cluster, kubeconfig, kube,
                                                       capsys):  # fmt: skip
    from tests.operator.test_reconcile import resource

    cr = resource(name="work", size=1, maxSize=4, autoscale={})
    cr["metadata"]["annotations"] = {"fluxhop.io/operated-by": "fluxhop-operator",
                                     "fluxhop.io/max-size": "4"}  # fmt: skip
    fake.flux_operator = False
    kube.apply(cr)
    assert main(["autoscale", "work", "--kubeconfig", str(kubeconfig), "--once"]) != 0
    err = capsys.readouterr().err
    assert "fluxhop's operator autoscales it" in err and err.count("\n") == 1, err
