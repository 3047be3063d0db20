"""The fake API server's controllers and API where a real control plane
showed how they behave (tests/realk8s/test_fake_parity.py): suspend and
resume, a plain pod delete, the eviction API, a scale-down, server-side
apply's conflicts after a merge patch, the log of a pod not yet scheduled,
the Job controller's two steps to Complete/Failed, and the TTL controller."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest

from fluxhop.cluster.api import Kube
from fluxhop.errors import AlreadyExists, ClusterError
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.placement import Placement
from fluxhop.workload.marks import prepare
from tests.cluster.fakeapi import DEFAULT_CRDS, FakeAPIServer
from tests.cluster.fixtures import SERVER, eventually, write_kubeconfig
from tests.cluster.kueue import Kueue

INDEX = "batch.kubernetes.io/job-completion-index"


def spec(nodes: int = 2, *, max_size: int | None = None, queue: str | None = None):
    return minicluster_from_flags(
        ["app"],
        image="ubuntu",
        nodes=nodes,
        name="demo",
        max_size=max_size,
        placement=Placement(queue=queue) if queue else None,
    )


def conditions(fake) -> list[tuple[str, str, str]]:
    job = fake.get("Job", "demo") or {}
    return [(c["type"], c["status"], c["reason"]) for c in job["status"].get("conditions", [])]


def pods(fake) -> dict[int, dict[str, Any]]:
    return {int(p["metadata"]["labels"][INDEX]): p for p in fake.objects(kinds=("Pod",))}


def running(fake, count: int) -> bool:
    found = pods(fake)
    return len(found) == count and all(p["status"]["phase"] == "Running" for p in found.values())


def events(fake, kind: str, name: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    with fake.lock:
        return [
            (event, obj)
            for _, event, k, _, obj in fake.history
            if k == kind and (name is None or obj["metadata"]["name"] == name)
        ]


def ended(fake, name: str) -> list[tuple[str, int | None]]:
    """A pod's last two events: the terminated status (exit code), then its removal."""
    out = []
    for event, pod in events(fake, "Pod", name)[-2:]:
        statuses = pod["status"].get("containerStatuses") or [{}]
        code = statuses[0].get("state", {}).get("terminated", {}).get("exitCode")
        out.append((event, code))
    return out


@pytest.fixture
def holding(fake):
    """Every rank runs until it is stopped."""
    fake.runner = lambda pod, index: None
    return fake


def test_suspend_writes_suspended_and_resume_makes_pods(holding, ops, kube):
    fake = holding
    ops.create(spec(queue="team-a"))
    fake.reconcile()
    assert conditions(fake) == [("Suspended", "True", "JobSuspended")]
    assert pods(fake) == {}
    kube.merge_patch("Job", "demo", {"spec": {"suspend": False}})  # as Kueue admits it
    eventually(lambda: running(fake, 2))
    assert conditions(fake) == [("Suspended", "False", "JobResumed")]
    names = [p["metadata"]["name"] for p in pods(fake).values()]
    kube.merge_patch("Job", "demo", {"spec": {"suspend": True}})
    eventually(lambda: pods(fake) == {})
    assert all(ended(fake, name) == [("MODIFIED", 143), ("DELETED", 143)] for name in names)
    assert conditions(fake) == [("Suspended", "True", "JobSuspended")]  # no failure counted


def test_a_plain_delete_fails_the_job_in_two_steps(holding, ops, kube):
    fake = holding
    ops.create(spec())
    eventually(lambda: running(fake, 2))
    lead, worker = (pods(fake)[i]["metadata"]["name"] for i in (0, 1))
    kube.delete("Pod", worker)
    assert ended(fake, worker) == [("MODIFIED", 143), ("DELETED", 143)]
    eventually(lambda: ("Failed", "True", "BackoffLimitExceeded") in conditions(fake))
    assert conditions(fake) == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert ended(fake, lead) == [("MODIFIED", 143), ("DELETED", 143)]  # stopped, then gone
    assert pods(fake) == {}  # nothing replaced
    order = [(k, e, o["metadata"]["name"]) for _, e, k, _, o in fake.history]
    assert order.index(("Pod", "DELETED", lead)) < max(
        i for i, (k, e, _) in enumerate(order) if k == "Job"
    )  # rank 0 is gone before the Job's last change (Failed)


def test_the_eviction_api_deletes_the_pod_and_the_job_replaces_it(holding, ops):
    fake = holding
    ops.create(spec())
    eventually(lambda: running(fake, 2))
    lead = pods(fake)[0]["metadata"]["name"]
    http = httpx2.Client(transport=fake.transport(), base_url=SERVER)
    path = f"/api/v1/namespaces/default/pods/{lead}/eviction"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": lead}}
    assert http.post(path, json={"kind": "Pod"}).status_code == 400
    answer = http.post(path, json=eviction)
    assert (answer.status_code, answer.json()["status"]) == (201, "Success")
    assert ended(fake, lead) == [("MODIFIED", 143), ("DELETED", 143)]
    (condition,) = [
        c for c in events(fake, "Pod", lead)[-1][1]["status"]["conditions"]
        if c["type"] == "DisruptionTarget"
    ]  # fmt: skip
    assert (condition["reason"], condition["message"]) == (
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )
    eventually(lambda: running(fake, 2) and pods(fake)[0]["metadata"]["name"] != lead)
    assert conditions(fake) == []  # ignored by the podFailurePolicy
    assert http.post(path, json=eviction).status_code == 404


def test_a_scale_down_deletes_the_highest_ranks(holding, ops):
    fake = holding
    root = ops.create(spec(3, max_size=3))
    eventually(lambda: running(fake, 3))
    last = pods(fake)[2]["metadata"]["name"]
    ops.scale(root, 2)
    eventually(lambda: sorted(pods(fake)) == [0, 1])
    assert ended(fake, last) == [("MODIFIED", 143), ("DELETED", 143)]
    fake.reconcile()
    assert running(fake, 2) and conditions(fake) == []  # not a failure


def test_a_reapply_after_a_resize_conflicts_unless_it_agrees_or_forces(holding, ops, kube):
    fake = holding
    root = ops.create(spec(2, max_size=3))
    ops.scale(root, 3)
    job = prepare(spec(2, max_size=3), "job")[-1]
    with pytest.raises(AlreadyExists) as err:
        kube.apply(job)
    assert str(err.value) == (
        "Job demo in namespace default: conflict: Apply failed with 2 conflicts: "
        'conflicts with "fluxhop" using batch/v1: - .spec.completions - .spec.parallelism'
    )
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 3  # the resize stays
    ops.scale(root, 2)
    kube.apply(job)  # the same values: no conflict
    ops.scale(root, 3)
    assert kube.apply(job, force=True)["spec"]["parallelism"] == 2  # force takes the fields


def test_creating_an_unchanged_minicluster_again_keeps_its_resize(holding, ops):
    """fluxhop create of the spec it made leaves the root alone (only its
    children are applied again): no conflict with the resize, which stays."""
    root = ops.create(spec(2, max_size=3))
    ops.scale(root, 3)
    ops.create(spec(2, max_size=3))
    assert holding.get("Job", "demo")["spec"]["parallelism"] == 3


def test_a_reapply_of_an_admitted_queued_job_conflicts_with_kueue(tmp_path):
    fake = FakeAPIServer(crds=DEFAULT_CRDS | {"Workload"})
    kube = Kube.connect(str(write_kubeconfig(tmp_path / "kc")), transport=fake.transport())
    try:
        job = prepare(spec(queue="team-a"), "job")[-1]
        kube.apply(job)
        Kueue(fake).admit("Job", "demo")
        with pytest.raises(
            AlreadyExists, match=r'conflict with "kueue" using batch/v1: \.spec\.su'
        ):
            kube.apply(job)
        assert fake.get("Job", "demo")["spec"]["suspend"] is False
    finally:
        kube.close()
        fake.close()


def test_the_log_of_a_pod_not_scheduled_is_empty_then_waits_to_start(tmp_path):
    fake = FakeAPIServer(controllers=False)
    kube = Kube.connect(str(write_kubeconfig(tmp_path / "kc")), transport=fake.transport())
    try:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "nowhere"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        }
        kube.create(pod)
        assert list(kube.log("nowhere", "c")) == []
        with fake.changed:
            fake.store[("Pod", "default", "nowhere")]["spec"]["nodeName"] = "node-1"
        with pytest.raises(ClusterError) as err:
            list(kube.log("nowhere", "c"))
        assert 'container "c" in pod "nowhere" is waiting to start: ContainerCreating' in str(
            err.value
        )
    finally:
        kube.close()
        fake.close()


def test_success_comes_in_two_steps_and_stops_the_rest(holding, ops):
    fake = holding
    ops.create(spec())
    eventually(lambda: running(fake, 2))
    lead, worker = (pods(fake)[i]["metadata"]["name"] for i in (0, 1))
    with fake.changed:  # rank 0 ends; the worker does not (it would linger)
        fake._terminate("default", fake.store[("Pod", "default", lead)], 0)
    eventually(lambda: ("Complete", "True", "SuccessPolicy") in conditions(fake))
    assert conditions(fake) == [
        ("SuccessCriteriaMet", "True", "SuccessPolicy"),
        ("Complete", "True", "SuccessPolicy"),
    ]
    assert ended(fake, worker) == [("MODIFIED", 143), ("DELETED", 143)]
    assert list(pods(fake)) == [0]  # rank 0's finished pod stays


def test_the_ttl_controller_deletes_a_finished_job_pods_first(fake, ops):
    go = []
    fake.runner = lambda pod, index: ([], 0) if go else None
    minicluster = spec()
    minicluster.spec.cleanup = True  # ttlSecondsAfterFinished: 0
    root = ops.create(minicluster)
    lead = ops.wait_lead_started(root, timeout=60)["metadata"]["name"]
    watches = len(fake.seen("WATCH"))
    with ThreadPoolExecutor(1) as pool:
        code = pool.submit(ops.wait_lead_end, root, lead, timeout=60)
        eventually(lambda: len(fake.seen("WATCH")) > watches)
        go.append(True)
        assert code.result(timeout=60) == 0  # read before the pod goes
    eventually(lambda: fake.get("Job", "demo") is None)
    assert fake.objects() == []  # and its ConfigMap, Secret, Service... with it
    order = [(e, k) for _, e, k, _, o in fake.history if k in ("Job", "Pod")]
    assert order[-1] == ("DELETED", "Job")
    assert ("DELETED", "Pod") in order[-4:-1]
    marked = [o for e, o in events(fake, "Job") if e == "MODIFIED"][-1]
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
