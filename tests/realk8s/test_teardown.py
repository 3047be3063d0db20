"""The test cluster leaves nothing behind: not when stopped, not when its
start is interrupted (Ctrl-C), and what a run killed outright (SIGKILL) left
is removed by the next start. These tests stop the session's cluster and
start it again; the conftest runs them last."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.conformance import REPO
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.node.node import NODE_NETNS_PREFIX
from tests.realk8s.tools import eventually, pod_manifest, wait_pod_phase

# A cluster in a process of its own; it prints "up" once a pod of it runs.
CHILD = """
import sys, time
from pathlib import Path
from tests.realk8s.cluster import LocalCluster, NodeSpec
from tests.realk8s.tools import pod_manifest, wait_pod_phase
cluster = LocalCluster(Path(sys.argv[1]), [NodeSpec("node-x")])
cluster.start()
with cluster.admin() as api:
    api.create("/api/v1/namespaces/default/pods", pod_manifest("stays", ["sleep", "600"]))
    wait_pod_phase(api, "default", "stays", "Running", timeout=180)
print("up", flush=True)
time.sleep(600)
"""


def child(cluster: LocalCluster) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(cluster.bin)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip


def test_stop_interrupt_and_kill_leave_nothing(cluster: LocalCluster):
    # a pod that ran in a container, with a volume: stop leaves nothing of it
    with cluster.admin() as api:
        api.create("/api/v1/namespaces/default/pods", pod_manifest(
            "mounts", ["true"], volumes=[{"name": "e", "emptyDir": {}}],
            container={"volumeMounts": [{"name": "e", "mountPath": "/srv/deep"}]}))  # fmt: skip
        wait_pod_phase(api, "default", "mounts", "Succeeded", timeout=120)
    cluster.stop()
    assert cluster.leftovers() == []
    # Ctrl-C part-way through a start: start() undoes what it did
    interrupted = child(cluster)
    eventually(
        "the API server starting", (cluster.workdir / "logs" / "kube-apiserver.log").exists, 60
    )
    interrupted.send_signal(signal.SIGINT)
    interrupted.communicate(timeout=120)
    assert cluster.leftovers() == []
    # SIGKILL with a pod running: the components die with it, the pod does not,
    # and the next start removes it all first
    killed = child(cluster)
    assert killed.stdout is not None and killed.stdout.readline() == "up\n"
    killed.kill()
    killed.communicate()

    def control_plane(line: str) -> bool:  # the containers' shims are containerd's too
        return str(cluster.bin) in line and "containerd-shim" not in line

    left = eventually("the control plane and the kubelets gone", lambda: not any(
        control_plane(line) for line in cluster.leftovers()) and cluster.leftovers())  # fmt: skip
    assert any(item.startswith("netns") for item in left), json.dumps(left)  # the pod runs on
    cluster.start()  # sweeps first, and the session gets its cluster back
    its_nodes = {f"netns {NODE_NETNS_PREFIX}{node.index}" for node in cluster.real_nodes.values()}
    assert not [i for i in cluster.leftovers() if i.startswith("netns") and i not in its_nodes]
