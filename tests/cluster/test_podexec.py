"""Commands in a pod through the API's exec (cluster/podexec.py) and the
Flux verbs over it (cluster/inside.PodInside), against the fake API server
with lightkube's own exec client (tests/cluster/fakeexec.py); the commands
run here, in bash. The real API server and kubelet: tests/realk8s."""

from __future__ import annotations

import subprocess

import pytest

from fluxhop.cluster.inside import PodInside
from fluxhop.cluster.podexec import pod_exec
from fluxhop.errors import Forbidden, InstanceError, NotFound
from tests.cluster.fakeexec import exec_through_fake
from tests.cluster.standin import recording_flux, write_env
from tests.cluster.test_inside import interactive


def run_here(pod: str, container: str, argv: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def lead(fake, ops, tmp_path):
    """An interactive MiniCluster whose rank 0 runs exec'd commands here."""
    fake.runner = lambda pod, index: None  # the brokers run until stopped
    root = ops.create(interactive("demo", str(tmp_path / "flux")))
    ops.wait_ready(root, timeout=60)
    fake.exec_runner = run_here
    with exec_through_fake():
        yield ops.require("demo"), ops.lead_pod(root)["metadata"]["name"]


def test_output_and_exit_code_come_back_and_argv_is_word_for_word(kube, lead):
    _, pod = lead
    script = 'printf "%s|" "$@"; echo oops >&2; exit 3'
    done = pod_exec(kube, pod, "demo", ["bash", "-c", script, "x", "a  b", "it's", ""], timeout=10)
    assert (done.returncode, done.stdout, done.stderr) == (3, "a  b|it's||", "oops\n")
    assert pod_exec(kube, pod, "demo", ["true"], timeout=10).returncode == 0


def test_a_role_without_pods_exec_is_one_forbidden_line(fake, kube, lead):
    fake.rbac = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    with pytest.raises(Forbidden) as refused:
        pod_exec(kube, lead[1], "demo", ["true"], timeout=10)
    assert "create pods/exec" in str(refused.value) and "\n" not in str(refused.value)
    assert fake.refused == ["create pods/exec"]


def test_a_pod_or_container_that_is_not_there_is_one_line(kube, lead):
    with pytest.raises(NotFound, match="Pod demo-gone not found"):
        pod_exec(kube, "demo-gone", "demo", ["true"], timeout=10)
    with pytest.raises(Exception, match="container nope is not valid") as wrong:
        pod_exec(kube, lead[1], "nope", ["true"], timeout=10)
    assert "\n" not in str(wrong.value)


def test_flux_verbs_run_beside_rank_0_through_exec(kube, lead, tmp_path):
    root, pod = lead
    inside = PodInside(kube, root, pod, timeout=10)
    with pytest.raises(InstanceError, match="the broker has not started in this pod yet"):
        inside.run("demo", ["resource", "drain", "1"], what="flux resource drain")
    log = tmp_path / "flux.log"
    write_env(tmp_path / "flux", flux_bin=str(recording_flux(tmp_path / "bin", log)))
    inside.run("demo", ["resource", "drain", "--update", "1-3", "a reason"], what="drain")
    assert log.read_text().splitlines() == ["resource drain --update 1-3 a reason"]
    with pytest.raises(InstanceError, match="streaming needs kubectl exec"):
        inside.stream("demo", ["job", "attach", "f1"])
