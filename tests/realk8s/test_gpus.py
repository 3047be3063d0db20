"""GPUs on the real cluster, with real Flux. On the real nodes node-r0's
two ``nvidia.com/gpu`` come from the tests' device plugin through the
kubelet's device manager (go/kubernetes/gpu-plugin: fake devices, nothing
probes them). The real
scheduler puts the pod that asks for two there and nowhere else, the
kubelet's allocation reaches the container (NVIDIA_VISIBLE_DEVICES, as
NVIDIA's plugin sets it), R declares them, and Flux gives each of the job's
tasks its own GPU (``gpu-affinity=per-task``) - under Fluxion and under
sched-simple."""

from __future__ import annotations

import pytest

from tests.realflux.schedulers import Scheduler
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import flux_image_flags
from tests.realk8s.tools import eventually, fluxhop, output

pytestmark = pytest.mark.usefixtures("needs_flux")
GPU = "nvidia.com/gpu"
SHOW = 'echo "$(hostname) ${CUDA_VISIBLE_DEVICES-unset} ${NVIDIA_VISIBLE_DEVICES-unset}"'


def gpu_node(cluster: LocalCluster) -> str:
    return "node-r0"


def test_the_device_plugin_gives_the_node_its_gpus(
    cluster: LocalCluster, admin: Api, real_nodes: list[str]
):
    """The kubelet takes the plugin's devices as the node's capacity."""

    def gpus() -> dict[str, str]:
        status = admin.get("/api/v1/nodes/node-r0").get("status", {})
        return {k: status.get(k, {}).get(GPU, "0") for k in ("capacity", "allocatable")}

    eventually("node-r0's GPUs", lambda: gpus() == {"capacity": "2", "allocatable": "2"}, 60)
    other = admin.get("/api/v1/nodes/node-r1")["status"]["capacity"]
    assert GPU not in other, other


def test_each_task_gets_a_gpu_of_the_node_that_has_them(
    cluster: LocalCluster, admin: Api, namespace: str, scheduler: Scheduler
):
    chosen = ["--sched-simple"] if scheduler.simple else []
    done = fluxhop(
        cluster, "run", "--namespace", namespace, *flux_image_flags(cluster),
        "--name", "gpus", "--keep", "-N", "1", "-n", "2", "-g", "1",
        "-o", "gpu-affinity=per-task", *chosen, "--", "sh", "-c", SHOW, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = sorted(output(done.stdout))
    assert [line.split()[:2] for line in lines] == [["gpus-0", "0"], ["gpus-0", "1"]], lines
    node = gpu_node(cluster)  # the devices the kubelet allocated, in every task
    allocated = {line.split()[2] for line in lines}
    assert len(allocated) == 1, lines
    assert sorted(allocated.pop().split(",")) == [f"GPU-{node}-0", f"GPU-{node}-1"], lines
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert [pod["spec"]["nodeName"] for pod in pods] == [gpu_node(cluster)]
    limits = pods[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits[GPU] == "2"
