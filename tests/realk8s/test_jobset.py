"""``--target jobset`` on the real JobSet controller (sigs.k8s.io/jobset, its
webhooks and its headless Service), with real Flux in the pods: the same
4 host names, exit code and argv as the Job target gives."""

from __future__ import annotations

import subprocess

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.controllers import Running
from tests.realk8s.placing import flux_image_flags
from tests.realk8s.tools import eventually, fluxhop, output

pytestmark = pytest.mark.usefixtures("needs_flux", "jobset")


def run(cluster: LocalCluster, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return fluxhop(cluster, "run", "--target", "jobset", "--namespace", namespace,
                   *flux_image_flags(cluster), *args)  # fmt: skip


def test_four_ranks_on_a_jobset(cluster: LocalCluster, admin: Api, namespace: str, jobset: Running):
    done = run(cluster, namespace, "-N", "4", "--name", "js", "--", "hostname")
    assert done.returncode == 0, done.stderr
    assert sorted(output(done.stdout)) == [f"js-node-0-{i}" for i in range(4)]
    jobsets = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
    eventually("the JobSet and what it made gone", lambda: not admin.get(jobsets)["items"] and not admin.get(
        f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"])  # fmt: skip


def test_exit_code_and_argv_on_a_jobset(cluster: LocalCluster, namespace: str):
    failed = run(cluster, namespace, "-N", "2", "--", "sh", "-c", "exit 3")
    assert failed.returncode == 3, failed.stderr
    argv = ["printf", "[%s]\\n", "a  b", "&&", "$(HOME)"]
    done = run(cluster, namespace, "-N", "1", "--", *argv)
    assert done.returncode == 0, done.stderr
    assert output(done.stdout) == ["[a  b]", "[&&]", "[$(HOME)]"]
