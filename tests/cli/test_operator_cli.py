"""``fluxhop operator``'s flags, with kopf's run loop replaced by a recorder
(the operator running for real: tests/realk8s/test_operator*.py)."""

from __future__ import annotations

import kopf
import pytest

from fluxhop.cli import main
from fluxhop.cli import operator as operator_cli
from fluxhop.operator import handlers, timers


@pytest.fixture
def started(monkeypatch):
    said: dict = {}
    monkeypatch.setattr(kopf, "run", lambda **kwargs: said.update(run=kwargs))
    monkeypatch.setattr(timers, "register_autoscaling", lambda every: said.update(every=every))
    monkeypatch.setattr(handlers, "own_namespace", None)
    monkeypatch.setattr(handlers, "selector", {})
    monkeypatch.setattr(handlers, "standalone", False)
    return said


def test_it_looks_at_autoscaled_miniclusters_every_interval(started, monkeypatch):
    monkeypatch.setenv("POD_NAMESPACE", "fluxhop-system")
    assert main(["operator", "-n", "team", "--standalone", "--autoscale-interval", "0.5"]) == 0
    assert started["every"] == 0.5 and started["run"]["namespaces"] == ["team"]
    assert handlers.own_namespace == "fluxhop-system"  # may read the metrics it scales on


def test_outside_a_pod_it_has_no_namespace_of_its_own(monkeypatch, tmp_path):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setattr(operator_cli, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "none")
    assert operator_cli.own_namespace() is None
    (tmp_path / "namespace").write_text("ops\n")
    monkeypatch.setattr(operator_cli, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "namespace")
    assert operator_cli.own_namespace() == "ops"


def test_an_interval_of_zero_is_one_line(started, capfd):
    assert main(["operator", "-A", "--standalone", "--autoscale-interval", "0"]) == 2
    err = capfd.readouterr().err
    assert "--autoscale-interval" in err and "Traceback" not in err
    assert "run" not in started
