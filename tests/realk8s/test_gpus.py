"""GPUs on the real cluster, with real Flux: node-a advertises two
``nvidia.com/gpu`` (the test kubelet's fake devices; nothing probes them), the
real scheduler puts the pod that asks for two there and nowhere else, R
declares them, and Flux gives each of the job's tasks its own GPU
(``gpu-affinity=per-task``) - under Fluxion and under sched-simple."""

from __future__ import annotations

import pytest

from tests.realflux.schedulers import Scheduler
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.tools import fluxhop, output

pytestmark = pytest.mark.usefixtures("needs_flux")
SHOW = 'echo "$(hostname) ${CUDA_VISIBLE_DEVICES-unset}"'


def test_each_task_gets_a_gpu_of_the_node_that_has_them(
    cluster: LocalCluster, admin: Api, namespace: str, scheduler: Scheduler
):
    chosen = ["--sched-simple"] if scheduler.simple else []
    done = fluxhop(
        cluster, "run", "--namespace", namespace, "--flux-in-image", "--image", "host",
        "--name", "gpus", "--keep", "-N", "1", "-n", "2", "-g", "1",
        "-o", "gpu-affinity=per-task", *chosen, "--", "sh", "-c", SHOW, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(output(done.stdout)) == ["gpus-0 0", "gpus-0 1"], done.stdout
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert [pod["spec"]["nodeName"] for pod in pods] == ["node-a"]
    limits = pods[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "2"
