"""MiniCluster operations against the fake API server: request sequences,
ownership, cleanup, retries, watches and every error message."""

from __future__ import annotations

import base64
import threading
import time

import httpx2
import pytest

from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import (
    AlreadyExists,
    ClusterError,
    Forbidden,
    InputError,
    NotInstalled,
    Unauthorized,
    Unreachable,
    WaitTimeout,
)
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.workload.status import job_state
from tests.cluster.fixtures import SERVER, foreign_job

CHILDREN = [
    "configmaps/demo-flux-config",
    "secrets/demo-flux-curve",
    "services/demo",
    "networkpolicies/demo-flux-broker",
]


def spec(**kwargs):
    options = {"image": "ubuntu:noble", "nodes": 2, "name": "demo"} | kwargs
    return minicluster_from_flags(["sh", "-c", 'echo "a  b" && exit 3'], **options)


def test_create_is_one_apply_per_object_plus_one_watch(fake, ops):
    root = ops.create(spec())
    ops.wait_ready(root, timeout=30)
    assert fake.seen() == [
        "GET jobs/demo",
        "GET /api/v1/nodes",  # may they mount the view image? (flux.container.volume auto)
        "APPLY jobs/demo",
        *(f"APPLY {c}" for c in CHILDREN),
        "WATCH pods",
    ]
    job = fake.get("Job", "demo")
    for kind, name in (
        ("ConfigMap", "demo-flux-config"),
        ("Secret", "demo-flux-curve"),
        ("Service", "demo"),
        ("NetworkPolicy", "demo-flux-broker"),
    ):
        owners = fake.get(kind, name)["metadata"]["ownerReferences"]
        assert owners == [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "demo",
                "uid": job["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    assert all(
        r.params.get("fieldManager") == "fluxhop" for r in fake.requests if r.verb == "APPLY"
    )


def test_pods_do_not_start_before_their_config_map_and_secret(fake, ops, monkeypatch):
    applied = []
    original = ops.kube.apply

    def slow_apply(obj, **kwargs):
        result = original(obj, **kwargs)
        applied.append(obj["kind"])
        if obj["kind"] == "Job":
            fake.reconcile()  # the job controller creates pods before the volumes exist
            fake.reconcile()  # and the kubelet looks at them
            pods = fake.objects(kinds=("Pod",))
            assert pods and all(p["status"]["phase"] == "Pending" for p in pods)
        return result

    monkeypatch.setattr(ops.kube, "apply", slow_apply)
    root = ops.create(spec())
    assert ops.wait_exit(root, timeout=30) == 0
    assert applied[0] == "Job"
    events = [o for (k, _, _), o in fake.store.items() if k == "Event"]
    assert any(e["reason"] == "FailedMount" for e in events)  # the kubelet waited for the volumes


def test_reapplying_an_unchanged_spec_changes_nothing_and_keeps_the_key(fake, ops):
    fake.schedulable = False  # keep the job controller from updating the Job's status meanwhile
    ops.create(spec())
    before = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in fake.objects()
        if o["kind"] != "Pod"
    }
    secret = fake.get("Secret", "demo-flux-curve")["data"]
    fake.requests.clear()
    ops.create(spec())
    after = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in fake.objects()
        if o["kind"] != "Pod" and (o["kind"], o["metadata"]["name"]) in before
    }
    assert after == before
    assert fake.get("Secret", "demo-flux-curve")["data"] == secret  # never rotated
    assert "APPLY secrets/demo-flux-curve" not in fake.seen()


def test_a_create_killed_after_its_root_gets_its_key_on_the_retry(fake, ops):
    """A process killed between the root and its children (no undo runs)
    left no CURVE Secret: the retry makes it (and never replaces one)."""
    fake.schedulable = False
    ops.create(spec())
    ops.kube.delete("Secret", "demo-flux-curve")  # as if the kill came before it
    fake.requests.clear()
    ops.create(spec())
    assert fake.get("Secret", "demo-flux-curve") is not None
    assert "POST secrets" in fake.seen()
    kept = fake.get("Secret", "demo-flux-curve")["data"]
    ops.create(spec())
    assert fake.get("Secret", "demo-flux-curve")["data"] == kept


def written(obj: dict) -> dict:
    """The parts of an object fluxhop writes (the controllers write its status)."""
    meta = obj["metadata"]
    return {
        "spec": obj["spec"],
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
    }


def test_same_name_different_spec_is_refused_and_nothing_changes(fake, ops):
    ops.create(spec())
    job = fake.get("Job", "demo")
    with pytest.raises(AlreadyExists) as info:
        ops.create(spec(nodes=3))
    assert "already exists" in str(info.value) and "fluxhop delete demo" in str(info.value)
    assert written(fake.get("Job", "demo")) == written(job)


def test_failure_part_way_leaves_nothing_behind(fake, ops):
    fake.fail(
        "PATCH",
        "/secrets/",
        403,
        message='secrets is forbidden: User "dev" cannot patch resource "secrets"',
    )
    with pytest.raises(Forbidden) as info:
        ops.create(spec())
    message = str(info.value)
    assert "you may not patch secrets in namespace default" in message
    assert "\n" not in message
    assert fake.objects() == []
    assert fake.seen("DELETE") == ["DELETE jobs/demo"]


def test_interrupt_during_create_deletes_what_was_created(fake, ops, monkeypatch):
    original = ops.kube.apply

    def interrupted(obj, **kwargs):
        if obj["kind"] == "Service":
            raise KeyboardInterrupt
        return original(obj, **kwargs)

    monkeypatch.setattr(ops.kube, "apply", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ops.create(spec())
    assert fake.objects() == []


def test_server_rejects_what_fails_the_schema(fake, ops, monkeypatch):
    import fluxhop.workload.marks as module

    original = module.render

    def broken(*args, **kwargs):
        objects = original(*args, **kwargs)
        objects[0]["data"] = {"bad key!": "x"} | objects[0]["data"]
        objects[-1]["spec"]["parallelizm"] = 2
        return objects

    monkeypatch.setattr(module, "render", broken)
    with pytest.raises(ClusterError, match="rejected Job demo"):
        ops.create(spec())
    assert fake.objects() == []


def test_delete_is_one_request_and_cascades(fake, ops):
    root = ops.create(spec())
    ops.wait_ready(root, timeout=30)
    fake.requests.clear()
    ops.delete_root(root)
    assert fake.seen() == ["DELETE jobs/demo"]
    assert fake.objects() == []


def test_retries_429_and_500_with_backoff(fake, ops, sleeps):
    fake.fail("PATCH", "/configmaps/", 429, times=2, headers={"Retry-After": "1"})
    fake.fail("GET", "/jobs/demo", 500, times=1)
    ops.create(spec())
    assert sleeps == [0.2, 1.0, 1.0]  # 500 backoff, then Retry-After twice
    assert fake.seen().count("GET jobs/demo") == 2
    assert fake.seen().count("APPLY configmaps/demo-flux-config") == 3
    assert fake.get("ConfigMap", "demo-flux-config") is not None


def test_gives_up_after_repeated_500s(fake, ops, sleeps):
    fake.fail("GET", "/jobs/demo", 500, times=10)
    with pytest.raises(ClusterError, match="500"):
        ops.create(spec())
    assert len(sleeps) == 5


def test_watch_resumes_after_a_dropped_connection(fake, ops):
    fake.drop_watch_after = 1
    root = ops.create(spec())
    assert ops.wait_exit(root, timeout=30) == 0
    watches = [r for r in fake.requests if r.verb == "WATCH"]
    assert len(watches) >= 2
    assert "resourceVersion" in watches[1].params  # resumed, not restarted


def test_watch_restarts_after_410_gone(fake, ops):
    fake.drop_watch_after = 1
    fake.compacted_rv = 10**9  # every resumed watch is too old
    fake.schedulable = False  # the job cannot end before the first watch has started
    root = ops.create(spec())
    result: list[object] = []
    waiter = threading.Thread(target=lambda: result.append(ops.wait_exit(root, timeout=60)))
    waiter.start()
    deadline = time.monotonic() + 60
    while not any(r.verb == "WATCH" for r in fake.requests):  # no event to block on
        assert time.monotonic() < deadline, "wait_exit never watched"
        time.sleep(0.01)
    fake.schedulable = True
    waiter.join(timeout=60)
    assert result == [0]
    watches = [r for r in fake.requests if r.verb == "WATCH"]
    assert len(watches) >= 3
    assert any("resourceVersion" not in w.params for w in watches[1:])  # restarted from scratch


def test_timeout_names_stuck_pods_and_why(fake, ops):
    fake.schedulable = False
    root = ops.create(spec())
    with pytest.raises(WaitTimeout) as info:
        ops.wait_ready(root, timeout=0.5)
    message = str(info.value)
    assert "timed out after 0.5s" in message
    assert "demo-0-" in message and "demo-1-" in message
    assert "FailedScheduling: 0/3 nodes are available: 3 Insufficient cpu." in message
    assert "\n" not in message


def test_job_exit_code_and_logs(fake, ops):
    fake.runner = lambda pod, index: (["a  b\n"], 3) if index == 0 else ([], 0)
    root = ops.create(spec())
    lead = ops.wait_lead_started(root, timeout=30)
    assert ops.wait_exit(root, timeout=30) == 3
    assert "".join(ops.kube.log(lead["metadata"]["name"], "demo", follow=True)) == "a  b\n"
    assert ops.status(root).state == "Failed"
    assert ops.status(root).exit_code == 3


@pytest.mark.parametrize("target, kind", [("jobset", "JobSet"), ("minicluster", "MiniCluster")])
def test_other_targets_run_through_the_fake(fake, ops, target, kind):
    root = ops.create(spec(), target)
    assert root.obj["kind"] == kind
    assert ops.wait_exit(root, timeout=30) == 0
    assert ops.find("demo").target == target
    ops.delete_root(root)
    assert fake.objects() == []


def test_missing_crd_says_what_to_install(fake, ops):
    fake.crds = set()
    with pytest.raises(NotInstalled) as info:
        ops.create(spec(), "jobset")
    assert str(info.value) == (
        "the JobSet API (jobset.x-k8s.io) is not installed in this cluster; "
        "install the JobSet controller, or use --target job"
    )
    with pytest.raises(NotInstalled, match=r"kubectl apply -k deploy/\) or the Flux Operator"):
        ops.create(spec(), "minicluster")


def test_unauthorized(fake, ops):
    fake.fail("GET", "/jobs/", 401, named=False)
    with pytest.raises(Unauthorized, match=r"refused the credentials of context fake \(401"):
        ops.create(spec())


def test_unreachable(kubeconfig):
    def refuse(request):
        raise httpx2.ConnectError("connection refused", request=request)

    kube = Kube.connect(
        str(kubeconfig), transport=httpx2.MockTransport(refuse), sleep=lambda s: None
    )
    with pytest.raises(Unreachable) as info:
        MiniClusters(kube).create(spec())
    assert str(info.value) == (
        f"cannot reach the Kubernetes API at {SERVER} (context fake of {kubeconfig}): "
        "connection refused"
    )


@pytest.mark.parametrize("verb", ["create", "find", "watch"])
def test_a_server_never_reached_is_said_in_seconds(kubeconfig, verb):
    """A refused first contact (a wrong kubeconfig) is tried for FIRST_CONTACT,
    not the request timeout: kubectl says it at once."""
    from fluxhop.cluster.api import FIRST_CONTACT

    def refuse(request):
        raise httpx2.ConnectError("connection refused", request=request)

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    kube = Kube.connect(str(kubeconfig), transport=httpx2.MockTransport(refuse), sleep=sleep,
                        clock=lambda: now[0])  # fmt: skip
    ops = MiniClusters(kube)
    act = {
        "create": lambda: ops.create(spec()),
        "find": lambda: ops.find("demo"),
        "watch": lambda: next(iter(kube.watch("Job"))),
    }[verb]
    with pytest.raises(Unreachable, match=f"context fake of {kubeconfig}"):
        act()
    assert 0 < now[0] <= FIRST_CONTACT


def test_an_api_server_that_restarts_is_waited_for(fake, kubeconfig):
    """Refused connections are tried again for the whole request timeout
    (a restarting API server), not a fixed five times."""
    refused = {"left": 8}

    def restarting(request):
        if refused["left"]:
            refused["left"] -= 1
            raise httpx2.ConnectError("connection refused", request=request)
        return fake.handle(request)

    sleeps: list[float] = []
    kube = Kube.connect(
        str(kubeconfig), transport=httpx2.MockTransport(restarting), sleep=sleeps.append
    )
    refused["left"] = 0
    ops = MiniClusters(kube)
    ops.create(spec())  # reached: from now on a refusal is a restart
    refused["left"] = 8
    ops.delete("demo")
    assert fake.get("Job", "demo") is None
    assert len(sleeps) == 8 and max(sleeps) == 2.0 and sum(sleeps) > 10  # doubling, capped
    refused["left"] = 1000
    with pytest.raises(Unreachable, match="cannot reach") as info:
        ops.create(spec())
    assert "context" not in str(info.value)  # reached before: not the kubeconfig's fault
    assert sum(sleeps[8:]) <= 30  # the request timeout bounds it


def test_a_watch_outlives_an_api_server_that_restarts(fake, kubeconfig):
    """A watch dropped by a restarting API server reconnects once it answers
    again (lightkube's reconnect is outside its error handler: fluxhop's own
    loop tries again for the whole request timeout)."""
    watches = {"served": 0, "refused": 0}

    def restarting(request):
        if request.url.params.get("watch") == "true":
            if watches["served"] and watches["refused"] < 8:
                watches["refused"] += 1
                raise httpx2.ConnectError("connection refused", request=request)
            watches["served"] += 1
        return fake.handle(request)

    sleeps: list[float] = []
    fake.drop_watch_after = 1
    finish = fake.runner  # rank 0 ends only after the API server is back: wait_exit cannot
    fake.runner = lambda pod, index: finish(pod, index) if watches["refused"] == 8 else None
    kube = Kube.connect(
        str(kubeconfig), transport=httpx2.MockTransport(restarting), sleep=sleeps.append
    )
    ops = MiniClusters(kube)
    root = ops.create(spec())
    assert ops.wait_exit(root, timeout=60) == 0
    assert watches["refused"] == 8 and max(sleeps) <= 2.0


def test_scale_within_max_size(fake, ops):
    fake.runner = lambda pod, index: None  # running: a MiniCluster that has ended is not resized
    root = ops.create(spec(max_size=4))
    scaled = ops.scale(root, 3)
    job = fake.get("Job", "demo")
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 3
    assert scaled.size == 3
    with pytest.raises(Exception, match="above the MiniCluster's maxSize 4"):
        ops.scale(scaled, 5)


def test_a_finished_minicluster_is_not_resized(fake, ops):
    # Kubernetes takes a new size on a finished Job and starts nothing
    ops.create(spec(max_size=4))
    for _ in range(50):  # controller steps, until the Job has ended
        fake.reconcile()
        job = fake.get("Job", "demo")
        if job_state(job) == "Succeeded":
            break
    with pytest.raises(InputError, match="has succeeded: its instance has ended"):
        ops.scale(ops.require("demo"), 3)
    # untouched by the scale; the fake's controllers may still write status
    after = fake.get("Job", "demo")
    assert after["spec"] == job["spec"]
    assert after["metadata"]["generation"] == job["metadata"]["generation"]


def test_find_ignores_objects_fluxhop_did_not_create(fake, ops):
    ops.kube.apply(foreign_job("demo"))  # a Job named demo that someone else owns
    with pytest.raises(ClusterError, match="not created by fluxhop"):
        ops.delete("demo")
    assert fake.get("Job", "demo") is not None


def test_secret_holds_a_loadable_certificate(fake, ops):
    from fluxhop.flux.curve import CurveCert

    ops.create(spec())
    text = base64.b64decode(fake.get("Secret", "demo-flux-curve")["data"]["curve.cert"]).decode()
    assert CurveCert.from_zpl(text).name == "demo"


def test_a_lost_answer_to_the_root_apply_still_undoes_it(fake, ops):
    """The API server commits the Job but every answer is lost: fluxhop cannot
    know, so it deletes the Job by name and confirms it is gone."""
    fake.fail("PATCH", "/jobs/demo", 0, times=10, mode="lost")
    with pytest.raises(Unreachable) as info:
        ops.create(spec())
    assert "\n" not in str(info.value)
    assert fake.objects() == []
    assert fake.seen("DELETE") == ["DELETE jobs/demo"]


def test_ctrl_c_during_the_root_apply_undoes_it(fake, ops, monkeypatch):
    original = ops.kube.apply

    def committed_then_interrupted(obj, **kwargs):
        original(obj, **kwargs)
        raise KeyboardInterrupt  # after the server took it, before fluxhop saw the answer

    monkeypatch.setattr(ops.kube, "apply", committed_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        ops.create(spec())
    assert fake.objects() == []


def undo_looks_find(ops, monkeypatch, answer) -> list:
    """The first GET (is the name free?) goes to the server; the undo's later
    ones get ``answer(name)`` instead. Returns the list of looks."""
    original = ops.kube.get
    looks = []

    def get(kind_name, name):
        looks.append(kind_name)
        return original(kind_name, name) if len(looks) == 1 else answer(name)

    monkeypatch.setattr(ops.kube, "get", get)
    return looks


def test_undo_leaves_a_root_that_is_not_ours(fake, ops, monkeypatch):
    """If someone else's Job holds the name when the undo looks, it stays."""
    fake.fail("PATCH", "/jobs/demo", 0, times=10, mode="hang")
    looks = undo_looks_find(ops, monkeypatch, foreign_job)
    with pytest.raises(Unreachable):
        ops.create(spec())
    assert len(looks) == 2 and fake.seen("DELETE") == []


def test_an_undo_that_cannot_reach_the_server_says_what_may_be_left(fake, ops, monkeypatch):
    fake.fail("PATCH", "/jobs/demo", 0, times=10, mode="lost")

    def unreachable(name):
        raise Unreachable(f"cannot reach the Kubernetes API at {SERVER}: timed out")

    undo_looks_find(ops, monkeypatch, unreachable)
    with pytest.raises(Unreachable) as info:
        ops.create(spec())
    message = str(info.value)
    assert "may be left in namespace default; delete it with fluxhop delete demo" in message
    assert "\n" not in message


def test_an_unresponsive_server_gives_up_once_the_request_timeout_is_spent(kubeconfig):
    def hang(request):
        raise httpx2.ReadTimeout("timed out", request=request)

    kube = Kube.connect(str(kubeconfig), transport=httpx2.MockTransport(hang), request_timeout=7)
    with pytest.raises(Unreachable) as info:
        MiniClusters(kube).create(spec())
    assert str(info.value) == (
        f"no answer from the Kubernetes API at {SERVER} within 7s (raise it with --request-timeout)"
    )


def test_retries_stop_within_the_request_timeout(kubeconfig):
    now = [0.0]
    tries = []

    def refuse(request):
        tries.append(now[0])
        raise httpx2.ConnectError("connection refused", request=request)

    def sleep(seconds):
        now[0] += seconds

    kube = Kube.connect(
        str(kubeconfig),
        transport=httpx2.MockTransport(refuse),
        request_timeout=1.0,
        sleep=sleep,
        clock=lambda: now[0],
    )
    with pytest.raises(Unreachable, match="connection refused"):
        MiniClusters(kube).create(spec())
    assert tries == [0.0, 0.2, pytest.approx(0.6)]  # the next 0.8 s wait would pass 1 s


def test_request_timeout_must_be_positive(kubeconfig):
    with pytest.raises(InputError, match="request-timeout"):
        Kube.connect(str(kubeconfig), request_timeout=0)


def kept_spec():
    """An interactive MiniCluster with spec.leadState: fluxhop makes demo-lead-state."""
    document = spec().model_dump(by_alias=True, exclude_none=True)
    document["spec"]["interactive"] = True
    document["spec"]["leadState"] = {}
    return type(spec()).model_validate(document)


@pytest.mark.parametrize("going", [False, True])
def test_a_claim_already_there_is_never_taken_over(fake, ops, going, lead_state_policy):
    claim = {"metadata": {"name": "demo-lead-state"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    if going:
        claim["metadata"]["deletionTimestamp"] = "2026-12-05T06:00:00Z"
    fake.seed("PersistentVolumeClaim", claim)
    with pytest.raises(AlreadyExists) as info:
        ops.create(kept_spec())
    said = str(info.value)
    assert "PersistentVolumeClaim demo-lead-state" in said and "\n" not in said
    assert ("still being deleted" in said) == going
    assert fake.get("Job", "demo") is None  # nothing created


def test_the_claim_fluxhop_makes_is_owned_by_the_job(fake, ops, lead_state_policy):
    ops.create(kept_spec())
    job = fake.get("Job", "demo")
    claim = fake.get("PersistentVolumeClaim", "demo-lead-state")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    ops.create(kept_spec())  # the same spec again: nothing refused, nothing changed
