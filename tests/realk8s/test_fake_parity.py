"""What the fake API server (tests/cluster/fakeapi.py) models, on the real
control plane: a watch from a compacted resourceVersion (410 and a fresh
list), suspend and resume, the eviction API and the Job's podFailurePolicy,
a plain pod delete, a scale-down, a re-apply after a resize, the log of a pod
that is not scheduled, and the TTL controller after a finished MiniCluster.
Each test states the real behaviour the fake now follows."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import AlreadyExists
from fluxhop.spec import MiniCluster
from fluxhop.workload.marks import prepare
from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.tools import FLUXHOP, command_env, eventually, output, pod_manifest


@pytest.fixture
def ops(cluster: LocalCluster, namespace: str) -> Iterator[MiniClusters]:
    kube = Kube.connect(str(cluster.admin_kubeconfig), namespace=namespace)
    yield MiniClusters(kube)
    kube.close()


def spec(name: str, *, size: int = 2, command: list[str] | None = None, **fields) -> MiniCluster:
    container: dict = {"image": "host"}
    if command is not None:
        container["command"] = command
    return MiniCluster.from_dict(
        minicluster_doc(
            name,
            size=size,
            interactive=command is None,
            logging={"quiet": True},
            flux={"container": {"disable": True}},
            containers=[container],
            **fields,
        )
    )


def pods(admin: Api, namespace: str) -> list[dict]:
    return admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]


def conditions(obj: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions") or []}


def test_a_watch_from_a_compacted_version_lists_again(
    ops: MiniClusters, admin: Api, namespace: str
):
    """The API server answers a resourceVersion it no longer has with an
    ERROR event (410 Expired); fluxhop's watch starts over with a list."""
    admin.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "seen"}})
    events = ops.kube.watch("ConfigMap", resource_version="1")
    kind, obj = next(events)
    assert (kind, obj["metadata"]["name"]) in {("ADDED", "seen"), ("ADDED", "kube-root-ca.crt")}


def test_suspend_and_resume(ops: MiniClusters, admin: Api, namespace: str):
    """A suspended Job has no pods (the Job controller writes Suspended);
    clearing suspend, as Kueue's admission does, makes them."""
    root = ops.create(spec("held", jobLabels={"kueue.x-k8s.io/queue-name": "q"}))
    job = f"/apis/batch/v1/namespaces/{namespace}/jobs/held"
    eventually("Suspended", lambda: conditions(admin.get(job)).get("Suspended") == "True")
    assert pods(admin, namespace) == []
    admin.patch(job, {"spec": {"suspend": False}}, "merge")
    eventually("the pods", lambda: len(pods(admin, namespace)) == root.size)
    assert conditions(admin.get(job))["Suspended"] == "False"


def test_a_plain_delete_of_rank_zero_fails_the_job(cluster: LocalCluster, ops: MiniClusters, admin: Api,
                                                  namespace: str, needs_flux: Path):  # fmt: skip
    """No DisruptionTarget for a DELETE: the pod ends by SIGTERM and counts
    as a failure, and with backoffLimit 0 the Job fails (it is not replaced)."""
    root = ops.create(spec("deleted", command=["sleep", "600"]))
    lead = ops.wait_lead_started(root, timeout=120)
    admin.delete(f"/api/v1/namespaces/{namespace}/pods/{lead['metadata']['name']}")
    code = ops.wait_lead_end(root, lead["metadata"]["name"], timeout=120)
    assert code is not None and code >= 128  # killed (SIGTERM, or SIGKILL after the grace period)
    job = f"/apis/batch/v1/namespaces/{namespace}/jobs/deleted"
    eventually("the Job failed", lambda: conditions(admin.get(job)).get("Failed") == "True", 120)


def test_an_eviction_is_ignored_by_the_pod_failure_policy(cluster: LocalCluster, admin: Api, namespace: str,
                                                          needs_flux: Path):  # fmt: skip
    """The eviction API marks the pod DisruptionTarget and deletes it; the
    Job's podFailurePolicy ignores it and replaces the pod once it is gone,
    and run streams the new rank 0 and exits with the job's code."""
    mark = Path("/run") / f"fluxhop-evict-{uuid.uuid4().hex[:8]}"
    script = f"if [ -e {mark} ]; then echo second; exit 5; fi; touch {mark}; echo first; sleep 600"
    argv = [str(FLUXHOP), "run", "--namespace", namespace, "--flux-in-image", "--image", "host",
            "-N", "1", "--name", "evicted", "--", "sh", "-c", script]  # fmt: skip
    run = subprocess.Popen(argv, env=command_env(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    try:
        eventually("the first attempt", mark.exists, 120)
        (lead,) = [p for p in pods(admin, namespace) if p["status"].get("phase") == "Running"]
        name = lead["metadata"]["name"]
        admin.create(f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                     {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})  # fmt: skip
        stdout, stderr = run.communicate(timeout=240)
    finally:
        mark.unlink(missing_ok=True)
        if run.poll() is None:
            run.kill()
    assert run.returncode == 5, stderr
    assert output(stdout) == ["first", "second"]
    assert "it was evicted" in stderr


def test_a_scale_down_stops_the_highest_ranks(
    ops: MiniClusters, admin: Api, namespace: str, needs_flux: Path
):
    """The Job controller deletes the pods whose index is at or above the new
    size (their brokers get SIGTERM); the others go on."""
    root = ops.create(spec("shrink", size=3, maxSize=3))
    ops.wait_ready(root, timeout=120)
    ops.scale(root, 2)

    def indexes() -> list[int]:
        return sorted(int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])
                      for p in pods(admin, namespace) if not p["metadata"].get("deletionTimestamp"))  # fmt: skip

    eventually("ranks 0 and 1 left", lambda: indexes() == [0, 1], 120)


def test_a_reapply_after_a_resize_conflicts_and_create_keeps_the_resize(
    ops: MiniClusters, admin: Api, namespace: str
):
    """Server-side apply merges by field manager: after fluxhop scale (a
    merge patch) the Job's parallelism is not the apply's any more, so
    applying the first value again conflicts (409); fluxhop create of the
    unchanged spec leaves the root alone and the resize stays."""
    queued = {"jobLabels": {"kueue.x-k8s.io/queue-name": "q"}}
    root = ops.create(spec("resized", size=2, maxSize=3, **queued))
    ops.scale(root, 3)
    job = prepare(spec("resized", size=2, maxSize=3, **queued).renamed(namespace=namespace))[-1]
    with pytest.raises(AlreadyExists, match=r"conflict.*\.spec\.parallelism"):
        ops.kube.apply(job)
    ops.create(spec("resized", size=2, maxSize=3, **queued))
    assert (
        admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/resized")["spec"]["parallelism"] == 3
    )


def test_the_log_of_a_pod_not_yet_scheduled_is_empty(admin: Api, namespace: str):
    """Before a node is chosen there is no kubelet to ask: 200 and nothing."""
    admin.create(f"/api/v1/namespaces/{namespace}/pods",
                 pod_manifest("nowhere", ["true"], nodeSelector={"no-such": "node"}))  # fmt: skip
    assert admin.text(f"/api/v1/namespaces/{namespace}/pods/nowhere/log") == ""


def test_cleanup_removes_a_finished_minicluster(
    ops: MiniClusters, admin: Api, namespace: str, needs_flux: Path
):
    """cleanup: true is ttlSecondsAfterFinished 0: the TTL controller deletes
    the Job (foreground) once it finishes, and fluxhop still reads the exit code."""
    root = ops.create(spec("tidy", size=2, command=["sh", "-c", "exit 0"], cleanup=True))
    assert ops.wait_exit(root, timeout=180) == 0
    eventually(
        "the Job gone",
        lambda: admin.find(f"/apis/batch/v1/namespaces/{namespace}/jobs/tidy") is None,
        120,
    )
