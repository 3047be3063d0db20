"""The operator's reconcile as a plain function (as kopf keeps handlers),
against the fake API server with the stand-in Flux Operator off: fluxhop's
operator is the one that turns MiniCluster resources into pods."""

from __future__ import annotations

import json

import httpx2
import pytest
import yaml

from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import SpecError
from fluxhop.operator.reconcile import RESOURCE_HASH, Reconciler
from fluxhop.spec import MiniCluster
from fluxhop.workload.status import job_state
from tests.conformance import CONFORMANCE

WRITES = ("APPLY", "PATCH", "POST", "DELETE", "CREATE", "UPDATE")


def resource(name="demo", size=2, **spec) -> dict:
    body = {"size": size, "interactive": True, "containers": [{"image": "ubuntu:noble"}], **spec}
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


@pytest.fixture
def apply(kube):
    """kubectl apply -f of a MiniCluster resource."""

    def apply(doc: dict) -> dict:
        return kube.apply(doc)

    return apply


@pytest.fixture
def reconciler(ops) -> Reconciler:
    return Reconciler(ops)


def current(fake, name="demo") -> dict:
    return fake.get("MiniCluster", name)


def conditions(cr: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in cr["status"]["conditions"]}


def events(fake) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in fake.objects(kinds=("Event",)) or []] + [
        (o["type"], o["reason"]) for (k, _, _), o in fake.store.items() if k == "Event"
    ]


def settle(fake, reconciler, name="demo"):
    """Reconcile until the resource has come up (Ready) or ended (Succeeded or
    Failed) and a further reconcile changes nothing: each fake.reconcile() is
    one step of its controllers, so this waits for states, not for time."""
    for _ in range(200):
        fake.reconcile()
        out = reconciler.reconcile(current(fake, name))
        settled = conditions(current(fake, name))
        done = any(settled.get(kind) == "True" for kind in ("Ready", "Succeeded", "Failed"))
        if done and "patch status" not in out.writes:
            return out
    raise AssertionError("the status never settled")


def test_a_resource_becomes_the_objects_fluxhop_create_makes_all_owned(fake, apply, reconciler):
    cr = apply(resource())
    out = reconciler.reconcile(current(fake))
    assert out.problem is None
    kinds = {o["kind"]: o for o in fake.objects()}
    assert {"Job", "ConfigMap", "Secret", "Service", "NetworkPolicy", "MiniCluster"} <= set(kinds)
    job = kinds["Job"]
    assert job["metadata"]["ownerReferences"][0]["uid"] == cr["metadata"]["uid"]
    for kind in ("ConfigMap", "Secret", "Service", "NetworkPolicy"):  # made first, so a Job
        assert kinds[kind]["metadata"]["ownerReferences"][0]["uid"] == cr["metadata"]["uid"]
    assert ("Normal", "Created") in events(fake)
    status = current(fake)["status"]
    assert status["size"] == 2 and status["maximumSize"] == 2
    assert status["selector"] == "fluxhop.io/minicluster=demo"
    assert status["observedGeneration"] == current(fake)["metadata"]["generation"]


def test_status_follows_the_brokers_and_a_resync_writes_nothing(fake, apply, reconciler):
    apply(resource())
    reconciler.reconcile(current(fake))
    settle(fake, reconciler)
    cr = current(fake)
    assert conditions(cr)["Ready"] == "True" and cr["status"]["brokersUp"] == 2
    assert conditions(cr)["Running"] == "True"
    assert {("Normal", "BrokersUp"), ("Normal", "CommandStarted")} <= set(events(fake))
    before = len(fake.requests)
    out = reconciler.reconcile(cr)
    assert out.writes == []
    assert [r for r in fake.requests[before:] if r.verb in WRITES] == []


def test_the_exit_code_reaches_the_status(fake, apply, reconciler):
    fake.runner = lambda pod, index: (["boom\n"], 3) if index == 0 else ([], 0)
    apply(resource(interactive=False, containers=[{"image": "ubuntu:noble", "command": "false"}]))
    reconciler.reconcile(current(fake))
    settle(fake, reconciler)
    cr = current(fake)
    assert cr["status"]["exitCode"] == 3
    failed = next(c for c in cr["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["message"] == "rank 0 exited with code 3"
    assert ("Warning", "JobFailed") in events(fake)


def test_size_changes_in_place_within_max_size_and_the_key_stays(fake, apply, reconciler, kube):
    apply(resource(size=2, maxSize=4))
    reconciler.reconcile(current(fake))
    secret = fake.get("Secret", "demo-flux-curve")
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 3}})
    out = reconciler.reconcile(current(fake))
    assert out.problem is None and "patch Job size" in out.writes
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 3
    assert current(fake)["status"]["size"] == 3
    assert fake.get("Secret", "demo-flux-curve") == secret  # never rotated
    assert ("Normal", "Scaled") in events(fake)


def test_kubectl_scale_goes_through_the_scale_subresource(fake, apply, reconciler):
    apply(resource(size=2, maxSize=4))
    reconciler.reconcile(current(fake))
    response = fake.handle(
        httpx2.Request(
            "PATCH",
            "https://fake.invalid:6443/apis/flux-framework.org/v1alpha2/namespaces/default/miniclusters/demo/scale",
            content=json.dumps({"spec": {"replicas": 4}}).encode(),
            headers={"content-type": "application/merge-patch+json"},
        )
    )
    assert response.status_code == 200
    reconciler.reconcile(current(fake))
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 4
    scale = fake.handle(
        httpx2.Request(
            "GET",
            "https://fake.invalid:6443/apis/flux-framework.org/v1alpha2/namespaces/default/miniclusters/demo/scale",
        )
    ).json()
    assert scale["status"] == {"replicas": 4, "selector": "fluxhop.io/minicluster=demo"}


def test_above_max_size_is_refused_with_the_clis_line(fake, apply, reconciler, kube):
    apply(resource(size=2, maxSize=3))
    reconciler.reconcile(current(fake))
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 5}})
    out = reconciler.reconcile(current(fake))
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 2
    with pytest.raises(SpecError) as cli_line:
        MiniCluster.from_dict({**resource(size=5, maxSize=3)})
    assert out.problem is not None and out.problem.message == str(cli_line.value)
    failed = next(c for c in current(fake)["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec" and failed["message"] == str(cli_line.value)
    assert ("Warning", "InvalidSpec") in events(fake)


def test_a_change_a_running_minicluster_cannot_take_is_reported(fake, apply, reconciler, kube):
    apply(resource())
    settle(fake, reconciler)  # its pods' progress is not what changes below
    job = fake.get("Job", "demo")
    kube.merge_patch("MiniCluster", "demo", {"spec": {"containers": [{"image": "ubuntu:plucky"}]}})
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None and out.problem.reason == "SpecChangeRefused"
    # untouched; its controller may still write status
    assert fake.get("Job", "demo")["spec"] == job["spec"]
    refused = next(c for c in current(fake)["status"]["conditions"] if c["type"] == "SpecApplied")
    assert refused["status"] == "False" and "delete the MiniCluster" in refused["message"]
    assert ("Warning", "SpecChangeRefused") in events(fake)
    again = reconciler.reconcile(current(fake))
    assert again.writes == []  # reported once, not on every resync


def test_what_fluxhop_leaves_out_of_a_resource_is_said_in_an_event(fake, apply, reconciler):
    apply(resource(logging={"timed": True}))
    apply(resource(name="plain"))
    reconciler.reconcile(current(fake))
    reconciler.reconcile(current(fake, "plain"))

    def said() -> list[dict]:
        return [o for (k, _, _), o in fake.store.items()
                if k == "Event" and o["reason"] == "SpecWarning"]  # fmt: skip

    assert [e["involvedObject"]["name"] for e in said()] == ["demo"]
    assert said()[0]["type"] == "Warning"
    assert said()[0]["message"].startswith("spec.logging.timed is ignored: ")
    reconciler.reconcile(current(fake))  # once, with the Job: not on every resync
    assert len(said()) == 1


@pytest.fixture
def finished(fake, apply, reconciler) -> dict:
    """MiniCluster demo (maxSize 4) has run its command: its Job has ended."""
    command = [{"image": "ubuntu:noble", "command": "hostname"}]
    apply(resource(maxSize=4, interactive=False, containers=command))
    for _ in range(50):  # controller steps, until the Job has ended
        settle(fake, reconciler)
        if conditions(current(fake)).get("Succeeded") == "True":
            break
    job = fake.get("Job", "demo")
    assert job_state(job) == "Succeeded"
    return job


def test_a_minicluster_whose_rank_0_has_exited_is_not_resized(finished, fake, reconciler, kube):
    # the workers still stopping: its Job has not ended, the resource says Succeeded
    fake.store[("Job", "default", "demo")]["status"]["conditions"] = []
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 3}})
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None and out.problem.reason == "ResizeRefused"
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 2


def test_a_finished_minicluster_is_not_resized(finished, fake, reconciler, kube):
    job = finished
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 3}})
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None and out.problem.reason == "ResizeRefused"
    assert "has succeeded: its instance has ended" in out.problem.message
    # not patched (it would start nothing): its spec and generation as they
    # were (the fake's Job controller may still add a condition to its status)
    after = fake.get("Job", "demo")
    assert (after["spec"], after["metadata"].get("generation")) == (
        job["spec"], job["metadata"].get("generation"))  # fmt: skip
    assert ("Normal", "Scaled") not in events(fake)


@pytest.fixture
def upgraded(monkeypatch):
    """The operator upgraded to a fluxhop that renders the same resource
    differently (here: one more line in every entrypoint)."""
    import fluxhop.workload.marks as marks

    real = marks.render

    def render(*args, **kwargs):
        objects = real(*args, **kwargs)
        for obj in objects:
            if obj["kind"] == "ConfigMap":
                obj["data"]["entrypoint.sh"] += "# rendered by a newer fluxhop\n"
        return objects

    monkeypatch.setattr(marks, "render", render)


def test_an_upgraded_operator_sees_no_change_in_an_unchanged_resource(
    fake, apply, reconciler, request
):
    apply(resource(size=2, maxSize=4))
    reconciler.reconcile(current(fake))
    job = fake.get("Job", "demo")
    request.getfixturevalue("upgraded")
    out = reconciler.reconcile(current(fake))
    assert out.problem is None
    after = fake.get("Job", "demo")  # its status may move meanwhile (the fake's Job controller)
    assert (after["spec"], after["metadata"].get("generation")) == (
        job["spec"], job["metadata"].get("generation"))  # fmt: skip
    assert "SpecChangeRefused" not in [reason for _, reason in events(fake)]


def test_a_job_from_before_resource_hashes_compares_what_it_rendered(fake, apply, reconciler, kube):
    apply(resource(leadState={"emptyDir": True}))  # as said: no lead state chosen on creation
    reconciler.reconcile(current(fake))
    stored = fake.store[("Job", "default", "demo")]
    del stored["metadata"]["annotations"][RESOURCE_HASH]  # as an older operator made it
    assert reconciler.reconcile(current(fake)).problem is None
    kube.merge_patch("MiniCluster", "demo", {"spec": {"containers": [{"image": "ubuntu:plucky"}]}})
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None and out.problem.reason == "SpecChangeRefused"


def test_deleting_the_resource_removes_everything(fake, apply, reconciler, kube):
    apply(resource())
    reconciler.reconcile(current(fake))
    kube.delete("MiniCluster", "demo")
    assert [o for o in fake.objects() if o["kind"] != "Event"] == []


def test_the_cli_finds_an_operated_minicluster(fake, apply, reconciler, ops: MiniClusters):
    apply(resource())
    reconciler.reconcile(current(fake))
    settle(fake, reconciler)
    root = ops.require("demo")
    assert str(root.target) == "minicluster" and root.fluxhop_pods
    assert root.container == "demo" and root.flux_root == "/mnt/flux"
    assert [s.name for s in ops.list()] == ["demo"]
    assert ops.status(root).state == "Running"


@pytest.mark.parametrize(
    "path",
    sorted((CONFORMANCE / "operator-examples").glob("*.yaml")),
    ids=lambda p: p.name,
)
def test_operator_examples_reconcile_or_say_why(fake, apply, reconciler, path):
    document = yaml.safe_load(path.read_text())
    document.setdefault("metadata", {})["namespace"] = "default"
    try:
        apply(document)
    except Exception as err:  # the CRD refuses it: the API server would too
        pytest.skip(f"the CRD refuses this example: {err}")
    out = reconciler.reconcile(current(fake, document["metadata"]["name"]))
    cr = current(fake, document["metadata"]["name"])
    if out.problem is None:
        assert fake.get("Job", document["metadata"]["name"]) is not None
    else:
        assert "\n" not in out.problem.message
    assert cr["status"]["conditions"]


def test_a_queued_resource_without_kueue_installed_says_so_and_makes_nothing(
    fake, apply, reconciler
):
    doc = resource()
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    apply(doc)
    out = reconciler.reconcile(current(fake))
    assert out.problem is not None and out.problem.condition == "Failed"
    assert "install Kueue" in out.problem.message
    assert [o["kind"] for o in fake.objects() if o["kind"] not in ("MiniCluster", "Event")] == []


def test_the_lead_state_warning_is_said_once_with_the_job(fake, apply, reconciler):
    """Without the policy that mounts a claim, an interactive resource keeps
    rank 0's state in an emptyDir and says so in one LeadState event: once the
    Job is made, not on each retry of a create that made nothing."""

    def said() -> list[dict]:
        return [o for (k, _, _), o in fake.store.items()
                if k == "Event" and o["reason"] == "LeadState"]  # fmt: skip

    queued = resource(name="queued")
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}  # no Kueue here
    apply(queued)
    for _ in range(3):
        assert reconciler.reconcile(current(fake, "queued")).problem is not None
    assert said() == []
    apply(resource())
    reconciler.reconcile(current(fake))
    reconciler.reconcile(current(fake))
    assert [e["involvedObject"]["name"] for e in said()] == ["demo"]
    assert said()[0]["type"] == "Warning" and "emptyDir" in said()[0]["message"]


def test_the_end_of_rank_0s_log_is_on_the_status_once_it_ended(fake, apply, reconciler):
    """status.output: what a manager cluster that has no pods can show of a
    dispatched MiniCluster (its last 50 lines, at most 4 KiB), read once."""
    fake.runner = lambda pod, index: (
        ([f"line {n}\n" for n in range(80)], 3) if index == 0 else ([], 0)
    )
    apply(resource(interactive=False, containers=[{"image": "ubuntu:noble", "command": "seq 80"}]))
    settle(fake, reconciler)
    output = current(fake)["status"]["output"]
    assert output.splitlines() == [f"line {n}" for n in range(30, 80)]
    before = len(fake.requests)
    reconciler.reconcile(current(fake))
    assert not [r for r in fake.requests[before:] if r.path.endswith("/log")]  # read once


def test_the_output_keeps_whole_lines_within_4_kib():
    from fluxhop.operator.status import output_tail

    kept = output_tail([f"{n:04d}" + "x" * 995 + "\n" for n in range(10)])  # 1000-byte lines
    assert len(kept.encode()) <= 4096 and kept.splitlines()[0].startswith("0006")
    assert output_tail([]) == ""


def _node(name: str, runtime: str) -> dict:
    return {"metadata": {"name": name}, "spec": {},
            "status": {"nodeInfo": {"kubeletVersion": "v1.36.3", "containerRuntimeVersion": runtime}}}  # fmt: skip


def _copied(fake) -> bool:
    pod = fake.store[("Job", "default", "demo")]["spec"]["template"]["spec"]
    return "initContainers" in pod and not any("image" in v for v in pod["volumes"])


def test_the_view_is_decided_once_and_an_older_copied_job_is_kept_as_it_is(fake, apply, reconciler):
    """flux.container.volume auto, decided by the nodes as the Job is made
    (an old containerd: copied, with a ViewCopied event); a node upgraded
    since changes nothing for that MiniCluster, and a Job made before
    resource hashes, copied, is not seen as changed."""
    fake.seed("Node", _node("old", "containerd://1.7.27"))
    apply(resource(leadState={"emptyDir": True}))  # as said: no lead state chosen on creation
    assert reconciler.reconcile(current(fake)).problem is None
    assert _copied(fake) and ("Warning", "ViewCopied") in events(fake)
    fake.seed("Node", _node("old", "containerd://2.4.2"))
    reconciler._nodes = None  # the next look lists the upgraded node
    stored = fake.store[("Job", "default", "demo")]
    del stored["metadata"]["annotations"][RESOURCE_HASH]  # as an older operator made it
    assert reconciler.reconcile(current(fake)).problem is None
    assert _copied(fake)
