"""``--queue`` with the real Kueue (sigs.k8s.io/kueue, its webhooks and CRD
conversions): a ResourceFlavor, a ClusterQueue with a CPU quota for two
brokers and a LocalQueue. A MiniCluster waits while another holds the
quota, with Kueue's own reason in run's message, and is admitted when it
frees; a higher priority preempts; and resizing an admitted Job is what
fluxhop's rule (spec/kueue.py resize_problem) says Kueue does with it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InputError
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.controllers import Running
from tests.realk8s.placing import flux_image_flags, placed_minicluster
from tests.realk8s.queues import KUEUE, local_queue, topology_queue
from tests.realk8s.tools import FLUXHOP, command_env, eventually, fluxhop

QUOTA = {"cpu": "2"}  # two brokers of one CPU each


@pytest.fixture
def queue(kueue: Running, admin: Api, namespace: str) -> Iterator[str]:
    """LocalQueue ``lq`` in the test's namespace, on a ClusterQueue of its own."""
    with local_queue(admin, namespace, "lq", QUOTA,
                     preemption={"withinClusterQueue": "LowerPriority"}) as name:  # fmt: skip
        yield name


def flags(cluster: LocalCluster, namespace: str, queue: str, *more: str) -> list[str]:
    return [
        "--namespace", namespace, "--queue", queue, "--cpu", "1",
        *flux_image_flags(cluster), *more,
    ]  # fmt: skip


def test_a_minicluster_waits_for_quota_with_kueues_reason(cluster: LocalCluster, admin: Api, namespace: str,
                                                          queue: str, needs_flux):  # fmt: skip
    held = fluxhop(
        cluster,
        "create",
        *flags(cluster, namespace, queue, "-N", "2", "--name", "first"),
        timeout=240,
    )
    assert held.returncode == 0, held.stderr
    argv = [
        str(FLUXHOP),
        "run",
        *flags(cluster, namespace, queue, "-N", "2", "--name", "second", "--", "hostname"),
    ]
    waiting = subprocess.Popen(argv, env=command_env(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    try:
        workloads = f"{KUEUE}/namespaces/{namespace}/workloads"

        def pending() -> bool:
            found = [w for w in admin.get(workloads)["items"] if "second" in w["metadata"]["name"]]
            return any(c["type"] == "QuotaReserved" and c["status"] == "False" and "insufficient" in c.get(
                "message", "") for w in found for c in w.get("status", {}).get("conditions") or [])  # fmt: skip

        eventually("Kueue holding the second back", pending, 120)
        assert (
            admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/second")["spec"]["suspend"]
            is True
        )
        assert fluxhop(cluster, "delete", "--namespace", namespace, "first").returncode == 0
        stdout, stderr = waiting.communicate(timeout=240)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, stderr
    assert "waiting for admission by queue lq: couldn't assign flavors" in stderr
    assert "insufficient unused quota for cpu in flavor default" in stderr
    assert sorted(line for line in stdout.splitlines() if line.startswith("second-")) == [
        "second-0",
        "second-1",
    ]


def test_resizing_an_admitted_job_is_what_kueue_restarts(cluster: LocalCluster, admin: Api, namespace: str,
                                                         queue: str):  # fmt: skip
    """The rule fluxhop scale follows (spec/kueue.py): Kueue stops an admitted
    Job whose size changes and queues it again (every broker restarts), so
    fluxhop refuses it; a MiniCluster still waiting in the queue is resized."""
    kube = Kube.connect(str(cluster.admin_kubeconfig), namespace=namespace)
    try:
        ops = MiniClusters(kube)
        doc = placed_minicluster(cluster, minicluster_doc("sized", size=1, maxSize=2, interactive=True, flux={"container": {"disable": True}},
                              jobLabels={"kueue.x-k8s.io/queue-name": queue},
                              containers=[{"image": "host", "resources": {"requests": {"cpu": "1"}}}]))  # fmt: skip
        root = ops.create(MiniCluster.from_dict(doc))
        job = f"/apis/batch/v1/namespaces/{namespace}/jobs/sized"
        eventually("admitted", lambda: admin.get(job)["spec"].get("suspend") is False, 120)
        with pytest.raises(InputError, match="admitted by Kueue queue lq"):
            ops.scale(ops.require("sized"), 2)
        # what the refusal spares the MiniCluster: the same change behind fluxhop's back
        version = admin.get(job)["metadata"]["resourceVersion"]
        admin.patch(job, {"spec": {"parallelism": 2, "completions": 2}}, "merge")
        stopped = False
        for _, obj in admin.watch(f"/apis/batch/v1/namespaces/{namespace}/jobs", version, timeout=60,
                                  fieldSelector="metadata.name=sized"):  # fmt: skip
            if obj.get("spec", {}).get("suspend") is True:
                stopped = True  # Kueue stopped it: its pods go, and it waits for admission again
                break
        assert stopped, "Kueue did not stop the resized Job"
        assert root.name == "sized"
    finally:
        kube.close()


def priority(admin: Api, name: str, value: int) -> None:
    admin.apply(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
    }, "test")  # fmt: skip


def test_a_higher_priority_preempts_and_run_says_so(cluster: LocalCluster, admin: Api, namespace: str,
                                                     queue: str, needs_flux):  # fmt: skip
    priority(admin, "fluxhop-test-low", 10)
    priority(admin, "fluxhop-test-high", 1000)
    low = [str(FLUXHOP), "run", *flags(cluster, namespace, queue, "-N", "2", "--name", "low", "--priority-class",
                                       "fluxhop-test-low", "--", "sh", "-c", "echo up; sleep 600")]  # fmt: skip
    first = subprocess.Popen(low, env=command_env(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        assert first.stdout is not None
        while (line := first.stdout.readline()) and line != "up\n":
            pass
        assert line == "up\n"
        high = fluxhop(cluster, "run", *flags(cluster, namespace, queue, "-N", "2", "--name", "high", "--priority-class",
                                              "fluxhop-test-high", "--", "hostname"), timeout=300)  # fmt: skip
        assert high.returncode == 0, high.stderr
        workloads = admin.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
        evicted = [c for w in workloads if "low" in w["metadata"]["name"]
                   for c in w.get("status", {}).get("conditions") or [] if c["type"] == "Evicted"]  # fmt: skip
        # the low one may already be admitted again: Kueue then keeps the cause in the message
        assert evicted and (
            evicted[0]["reason"] == "Preempted"
            or evicted[0]["message"].startswith("Previously: Preempted")
        ), workloads
    finally:
        first.send_signal(2)  # Ctrl-C: run deletes it
        _, stderr = first.communicate(timeout=120)
    assert "its queue took the MiniCluster back" in stderr, stderr


def test_topology_aware_scheduling_takes_the_topology(cluster: LocalCluster, admin: Api, namespace: str,
                                                       kueue: Running, real_nodes: list[str],
                                                       needs_flux):  # fmt: skip
    """A Topology over the kubelets' node labels (zone, then host name) and a
    flavor that names it: --topology required:ZONE puts every broker in one
    zone. Each real node is a zone of its own, with two CPUs: the two brokers
    of one CPU each share a node, which the scheduler alone would not choose
    (it spreads a Job's pods)."""
    with topology_queue(admin, namespace, "near", {"cpu": "8"}):
        done = fluxhop(cluster, "run", *flags(cluster, namespace, "near", "-N", "2", "--name", "near", "--keep",
                                              "--topology", "required:topology.kubernetes.io/zone",
                                              "--", "hostname"), timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        pods = admin.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector="job-name=near")[
            "items"
        ]
        zones = {admin.get(f"/api/v1/nodes/{p['spec']['nodeName']}")["metadata"]["labels"][
            "topology.kubernetes.io/zone"] for p in pods}  # fmt: skip
        assert len(pods) == 2 and len(zones) == 1, zones
        (workload,) = [w for w in admin.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
                       if "near" in w["metadata"]["name"]]  # fmt: skip
        assignment = workload["status"]["admission"]["podSetAssignments"][0]
        assert assignment.get("topologyAssignment"), (
            assignment
        )  # Kueue placed it, not the scheduler alone
        fluxhop(cluster, "delete", "--namespace", namespace, "near")
