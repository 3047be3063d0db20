"""What the fake API server (tests/cluster/fakeapi.py) models, on the real
control plane, its pods on the real nodes: a watch from a compacted resourceVersion (410 and a fresh
list), suspend and resume, the eviction API and the Job's podFailurePolicy,
a plain pod delete, a scale-down, a re-apply after a resize, the log of a pod
that is not scheduled, and the TTL controller after a finished MiniCluster.
Each test states the real behaviour the fake now follows."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import AlreadyExists
from fluxhop.spec import MiniCluster
from fluxhop.workload.marks import prepare
from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.tools import FLUXHOP, command_env, eventually, output, pod_manifest


@pytest.fixture
def ops(cluster: LocalCluster, namespace: str) -> Iterator[MiniClusters]:
    kube = Kube.connect(str(cluster.admin_kubeconfig), namespace=namespace)
    yield MiniClusters(kube)
    kube.close()


def document(cluster: LocalCluster, name: str, *, size: int = 2,
             command: list[str] | None = None, **fields) -> dict:  # fmt: skip
    """A MiniCluster of an image with Flux, placed on the real nodes when
    the cluster has them."""
    container: dict = {"image": "host", **fields.pop("container", {})}
    if command is not None:
        container["command"] = command
    return placed_minicluster(cluster, minicluster_doc(
        name, size=size, interactive=command is None, logging={"quiet": True},
        flux={"container": {"disable": True}}, containers=[container], **fields,
    ))  # fmt: skip


def spec(cluster: LocalCluster, name: str, **fields) -> MiniCluster:
    return MiniCluster.from_dict(document(cluster, name, **fields))


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


def test_suspend_and_resume(cluster: LocalCluster, ops: MiniClusters, admin: Api, namespace: str):
    """A suspended Job has no pods (the Job controller writes Suspended);
    clearing suspend, as Kueue's admission does, makes them. Held by
    spec.suspend, not a queue label: whether Kueue runs by now (a session's
    fixture) must not change what this test sees."""
    root = ops.create(spec(cluster, "held", suspend=True))
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
    root = ops.create(spec(cluster, "deleted", command=["sleep", "600"]))
    lead = ops.wait_lead_started(root, timeout=120)
    admin.delete(f"/api/v1/namespaces/{namespace}/pods/{lead['metadata']['name']}")
    code = ops.wait_lead_end(root, lead["metadata"]["name"], timeout=120)
    assert code is not None and code >= 128  # killed (SIGTERM, or SIGKILL after the grace period)
    job = f"/apis/batch/v1/namespaces/{namespace}/jobs/deleted"
    eventually("the Job failed", lambda: conditions(admin.get(job)).get("Failed") == "True", 120)


def test_an_eviction_is_ignored_by_the_pod_failure_policy(
    cluster: LocalCluster, admin: Api, namespace: str, tmp_path: Path, needs_flux: Path
):
    """The eviction API marks the pod DisruptionTarget and deletes it; the
    Job's podFailurePolicy ignores it and replaces the pod once it is gone,
    and run streams the new rank 0 and exits with the job's code. Which
    attempt it is, the command reads from a ConfigMap the test changes once
    the first has said so (a new pod mounts it as it is then)."""
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    admin.create(configmaps, {"metadata": {"name": "attempt"}, "data": {"attempt": "first"}})
    script = ('if [ "$(cat /attempt/attempt)" = second ]; then echo second; exit 5; fi; '
              "echo first; sleep 600")  # fmt: skip
    mounted = {"volumes": {"attempt": {"path": "/attempt", "configMapName": "attempt"}}}
    path = tmp_path / "evicted.yaml"
    path.write_text(yaml.safe_dump(document(cluster, "evicted", size=1, container=mounted,
                                            command=["sh", "-c", script])))  # fmt: skip
    argv = [str(FLUXHOP), "run", "--namespace", namespace, "-f", str(path)]
    run = subprocess.Popen(argv, env=command_env(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    try:

        def said_first() -> str | None:
            for pod in pods(admin, namespace):
                name = pod["metadata"]["name"]
                if (
                    pod["status"].get("phase") == "Running"
                    and "first"
                    in admin.text(f"/api/v1/namespaces/{namespace}/pods/{name}/log").split()
                ):
                    return str(name)
            return None

        name = eventually("the first attempt", said_first, 120)
        admin.patch(f"{configmaps}/attempt", {"data": {"attempt": "second"}}, "merge")
        admin.create(f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                     {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})  # fmt: skip
        stdout, stderr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 5, stderr
    assert output(stdout) == ["first", "second"]
    assert "it was evicted" in stderr


def test_a_scale_down_stops_the_highest_ranks(
    cluster: LocalCluster, ops: MiniClusters, admin: Api, namespace: str, needs_flux: Path
):
    """The Job controller deletes the pods whose index is at or above the new
    size (their brokers get SIGTERM); the others go on."""
    root = ops.create(spec(cluster, "shrink", size=3, maxSize=3))
    ops.wait_ready(root, timeout=120)
    ops.scale(root, 2)

    def indexes() -> list[int]:
        return sorted(int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])
                      for p in pods(admin, namespace) if not p["metadata"].get("deletionTimestamp"))  # fmt: skip

    eventually("ranks 0 and 1 left", lambda: indexes() == [0, 1], 120)


def test_a_reapply_after_a_resize_conflicts_and_create_keeps_the_resize(
    cluster: LocalCluster, ops: MiniClusters, admin: Api, namespace: str
):
    """Server-side apply merges by field manager: after fluxhop scale (a
    merge patch) the Job's parallelism is not the apply's any more, so
    applying the first value again conflicts (409); fluxhop create of the
    unchanged spec leaves the root alone and the resize stays."""
    queued = {"suspend": True}  # no pods needed; and no Kueue, whether it runs or not
    root = ops.create(spec(cluster, "resized", size=2, maxSize=3, **queued))
    ops.scale(root, 3)
    job = prepare(
        spec(cluster, "resized", size=2, maxSize=3, **queued).renamed(namespace=namespace)
    )[-1]
    with pytest.raises(AlreadyExists, match=r"conflict.*\.spec\.parallelism"):
        ops.kube.apply(job)
    ops.create(spec(cluster, "resized", size=2, maxSize=3, **queued))
    assert (
        admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/resized")["spec"]["parallelism"] == 3
    )


def test_the_log_of_a_pod_not_yet_scheduled_is_empty(admin: Api, namespace: str):
    """Before a node is chosen there is no kubelet to ask: 200 and nothing."""
    admin.create(f"/api/v1/namespaces/{namespace}/pods",
                 pod_manifest("nowhere", ["true"], nodeSelector={"no-such": "node"}))  # fmt: skip
    assert admin.text(f"/api/v1/namespaces/{namespace}/pods/nowhere/log") == ""


def test_cleanup_removes_a_finished_minicluster(
    cluster: LocalCluster, ops: MiniClusters, admin: Api, namespace: str, needs_flux: Path
):
    """cleanup: true is ttlSecondsAfterFinished 0: the TTL controller deletes
    the Job (foreground) once it finishes, and fluxhop still reads the exit code."""
    root = ops.create(spec(cluster, "tidy", size=2, command=["sh", "-c", "exit 0"], cleanup=True))
    assert ops.wait_exit(root, timeout=180) == 0
    eventually(
        "the Job gone",
        lambda: admin.find(f"/apis/batch/v1/namespaces/{namespace}/jobs/tidy") is None,
        120,
    )
