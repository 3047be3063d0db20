"""Faults on the real cluster, with real Flux: the API server crashes and
comes back while ``fluxhop run`` waits (run still streams every line once
and exits with the job's code), and a node's kubelet stops with rank 0 on it
(what ``run`` and ``list`` say; docs/operations.md tells the same)."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import uuid

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import LOST_NODE, flux_image_flags
from tests.realk8s.tools import FLUXHOP, command_env, eventually, fluxhop, kubectl, output

pytestmark = pytest.mark.usefixtures("needs_flux")


def start_run(cluster: LocalCluster, namespace: str, *args: str, image: list[str] | None = None
              ) -> subprocess.Popen[str]:  # fmt: skip
    """``fluxhop run`` in the background, with the Flux image (``image``: its flags)."""
    image = image if image is not None else flux_image_flags(cluster)
    argv = [str(FLUXHOP), "run", "--namespace", namespace, *image, *args]
    return subprocess.Popen(argv, env=command_env(cluster), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def lead_log(admin: Api, namespace: str, name: str) -> str:
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={name}")[
        "items"
    ]
    lead = [
        p
        for p in pods
        if p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") == "0"
    ]
    if not lead or lead[0]["status"].get("phase") != "Running":
        return ""
    return admin.text(f"/api/v1/namespaces/{namespace}/pods/{lead[0]['metadata']['name']}/log")


def touch_in_pods(cluster: LocalCluster, admin: Api, namespace: str, job: str, path: str) -> None:
    """``touch path`` in every pod of ``job``, through the kubelet's exec."""
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={job}")
    for pod in pods["items"]:
        kubectl(cluster, "exec", "-n", namespace, pod["metadata"]["name"], "--", "touch", path)


def test_run_outlives_an_api_server_crash(cluster: LocalCluster, admin: Api, namespace: str):
    mark = f"/tmp/fluxhop-test-{uuid.uuid4().hex[:8]}"  # each pod's own /tmp
    script = f"echo before; while [ ! -e {mark} ]; do sleep 0.1; done; echo after; exit 4"
    run = start_run(cluster, namespace, "-N", "2", "--name", "crash", "--", "sh", "-c", script)
    try:
        assert run.stdout is not None
        seen = []
        while (line := run.stdout.readline()) and line != "before\n":
            seen.append(line)  # the brokers' own lines, until run streams rank 0's command
        assert line == "before\n", "".join(seen)
        cluster.restart_apiserver(crash=True)  # while run follows rank 0's log
        touch_in_pods(cluster, admin, namespace, "crash", mark)
        # read on through run.stdout: the other rank's "before" may be in its
        # buffer already, where communicate() (which reads the pipe) never looks
        watchdog = threading.Timer(180, run.kill)
        watchdog.start()
        try:
            assert run.stderr is not None
            with run.stdout, run.stderr:
                stdout = "".join(seen) + line + run.stdout.read()
                stderr = run.stderr.read()
            run.wait()
        finally:
            watchdog.cancel()
    finally:
        if run.poll() is None:
            run.kill()
    lines = output(stdout)
    assert run.returncode == 4, stderr
    assert lines == ["before", "before", "after", "after"], stdout  # each rank's line, once


def lost_node(cluster: LocalCluster) -> tuple[str, list[str]]:
    """The node a test loses (its kubelet and pods killed, then started
    again) and the flags that put a MiniCluster there."""
    flags = ["--node-selector", f"kubernetes.io/hostname={LOST_NODE}"]
    return LOST_NODE, [*flux_image_flags(cluster), *flags]


def bring_back(cluster: LocalCluster, admin: Api, node: str) -> None:
    """A lost node's kubelet started again: the Node registers anew."""
    cluster.start_kubelet(node)
    eventually(f"{node} Ready", lambda: node in cluster.ready_nodes(admin), 120)


def test_a_node_that_stops_answering(cluster: LocalCluster, admin: Api, namespace: str):
    """The node's kubelet dies with both brokers on it. The node lifecycle
    controller marks the node NotReady, the taint manager evicts its pods,
    but they stay Terminating - no kubelet confirms their end - so the Job
    cannot replace them: run says so, list says Disrupted, and a deleted
    Node (the pod garbage collector then removes its pods) ends it."""
    node, placement = lost_node(cluster)
    script = "echo started; sleep 600"
    run = start_run(cluster, namespace, "-N", "2", "--name", "lost", "--", "sh", "-c", script,
                    image=placement)  # fmt: skip
    try:
        assert run.stdout is not None
        while (line := run.stdout.readline()) and line != "started\n":
            pass  # run streams rank 0 now: both brokers are up, on the node
        assert line == "started\n", run.communicate(timeout=60)
        nodes = {
            p["spec"]["nodeName"]
            for p in admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        }
        assert nodes == {node}
        cluster.stop_kubelet(node)
        listed = eventually("list says Disrupted", lambda: (
            out := fluxhop(cluster, "list", "--namespace", namespace).stdout) and "Disrupted" in out and out,
            120)  # fmt: skip
        assert re.search(r"^lost\s+job\s+2\s+Disrupted\s", listed, re.M), listed
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=120)
        assert (
            "rank 0's pod lost-0-" in stderr and f"its node {node} stopped answering" in stderr
        ), stderr
        assert f"kubectl delete node {node}" in stderr
        assert run.returncode == 130, stderr
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        admin.delete(f"/api/v1/nodes/{node}")  # as the message advises
        eventually(
            "the pods collected",
            lambda: not admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"],
            120,
        )
        cluster.remove_pods_of(node)
        bring_back(cluster, admin, node)
