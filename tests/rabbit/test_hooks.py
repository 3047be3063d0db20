"""The DWS setup/teardown hooks against the fake API server (which refuses
anything the real schemas refuse and garbage-collects through owners)."""

from __future__ import annotations

import pytest

import fluxhop
from fluxhop.errors import Forbidden
from fluxhop.rabbit import RabbitRequest, Workflow
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.hooks import LOG_LIMIT, on_post_run, on_pre_run, on_setup, on_teardown, tail
from fluxhop.rabbit.policy import Owner, Policy
from tests.cluster.fakeapi import DEFAULT_CRDS, NNF_KINDS, FakeAPIServer
from tests.cluster.fixtures import foreign_job
from tests.rabbit.conftest import RABBITS, WORKFLOW_UID, rabbit_job, workflow_object

OWNER = Owner(uid=1001, gid=2001, user="alice", groups=("hpc",))
KINDS = ("ConfigMap", "Secret", "Service", "NetworkPolicy", "Job", "MiniCluster")
COMMAND_JOB = rabbit_job({"image": "lammps:cxi", "command": "lmp -in in.reaxc", "nodes": 2})


def client_for(fake, kubeconfig, target="job"):
    return fluxhop.Client(kubeconfig=str(kubeconfig), transport=fake.transport(), target=target)


@pytest.fixture
def client(fake, kubeconfig):
    with client_for(fake, kubeconfig) as api:
        yield api


@pytest.fixture
def saved():
    return []


def managed(fake, namespace="default"):
    return {
        (o["kind"], o["metadata"]["name"])
        for o in fake.objects(namespace, KINDS)
        if o["kind"] != "Pod"
    }


@pytest.fixture
def workflow():
    """A Workflow with no file system: what NNF mounted is read on the real
    cluster (tests/realk8s/test_rabbit_dws.py), not served by the fake."""
    return workflow_object()


def test_setup_checks_and_makes_nothing(fake, workflow):
    assert on_setup(COMMAND_JOB, workflow, RABBITS, OWNER) == "fluxjob-1234"
    assert managed(fake) == set()
    with pytest.raises(RabbitError, match=r"rabbit\.mpi\.nodes"):
        on_setup(rabbit_job({"nodes": "two"}), workflow, RABBITS, OWNER)
    assert on_setup({"attributes": {"system": {"dw": "xfs"}}}, workflow, RABBITS, OWNER) is None


def test_pre_run_without_what_nnf_writes_is_one_line_and_makes_nothing(fake, client):
    flow = workflow_object("#DW jobdw type=gfs2 capacity=10GiB name=scratch")
    with pytest.raises(RabbitError, match=r"no NnfAccess fluxjob-1234-0-servers .* PreRun"):
        on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert managed(fake) == set()


def test_pre_run_creates_the_minicluster_owned_by_the_workflow(fake, client, workflow):
    name = on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    assert name == "fluxjob-1234"
    assert managed(fake) == {
        ("ConfigMap", "fluxjob-1234-flux-config"),
        ("Secret", "fluxjob-1234-flux-curve"),
        ("Service", "fluxjob-1234"),
        ("NetworkPolicy", "fluxjob-1234-flux-broker"),
        ("Job", "fluxjob-1234"),
    }
    job = fake.get("Job", name)
    owners = job["metadata"]["ownerReferences"]
    assert owners == [
        {
            "apiVersion": "dataworkflowservices.github.io/v1alpha7",
            "kind": "Workflow",
            "name": "fluxjob-1234",
            "uid": WORKFLOW_UID,
        }
    ]
    template = job["spec"]["template"]["spec"]
    assert template["securityContext"]["runAsGroup"] == 2001
    assert not any(v["name"].startswith("rabbit-") for v in template["volumes"])  # none asked


def desired(obj):
    """What fluxhop writes (not the status the controllers add)."""
    meta = obj["metadata"]
    return (
        meta["uid"],
        meta.get("labels"),
        meta.get("annotations"),
        obj.get("spec"),
        obj.get("data"),
    )


def test_pre_run_twice_changes_nothing(fake, client, workflow):
    on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    before = {k: desired(fake.get(*k)) for k in managed(fake)}
    assert (
        on_pre_run(COMMAND_JOB, workflow, list(reversed(RABBITS)), OWNER, client) == "fluxjob-1234"
    )
    after = {k: desired(fake.get(*k)) for k in managed(fake)}
    assert after == before  # same objects, same CURVE key


def test_a_job_without_rabbit_mpi_gets_nothing(fake, client, workflow):
    assert (
        on_pre_run({"attributes": {"system": {"dw": "xfs"}}}, workflow, RABBITS, OWNER, client)
        is None
    )
    assert fake.requests == []


def test_policy_refuses_before_touching_the_cluster(fake, client, workflow):
    policy = Policy.from_config({"users": ["bob"]})
    with pytest.raises(RabbitError, match=r"user alice .* may not create rabbit MiniClusters"):
        on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client, policy=policy)
    assert fake.requests == []
    assert on_pre_run(
        COMMAND_JOB,
        workflow,
        RABBITS,
        OWNER,
        client,
        policy=Policy.from_config({"groups": ["hpc"]}),
    )


def test_bad_request_is_a_clear_error_and_creates_nothing(fake, client, workflow):
    with pytest.raises(RabbitError, match=r"rabbit\.mpi\.nodes=\"two\""):
        on_pre_run(rabbit_job({"nodes": "two"}), workflow, RABBITS, OWNER, client)
    assert fake.requests == []


def test_a_failed_create_leaves_nothing_behind(fake, client, workflow):
    fake.fail("PATCH", "configmaps", 403)
    with pytest.raises(Forbidden):
        on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    assert managed(fake) == set()


def test_the_workflows_namespace_is_used(fake, client):
    flow = workflow_object(namespace="nnf")
    on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert managed(fake, "nnf") and not managed(fake, "default")
    assert on_teardown(flow, client, lambda text: None)
    assert not managed(fake, "nnf")


def test_teardown_keeps_the_last_50000_characters_of_rank_0(fake, client, workflow, saved):
    lines = [f"step {i:06d} energy -1.{i:08d}\n" for i in range(4000)]  # ~128 kB
    fake.runner = lambda pod, index: (lines if index == 0 else ["worker noise\n"], 0)
    name = on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    client.wait(name, timeout=30)
    assert on_teardown(workflow, client, saved.append) is True
    assert saved == ["".join(lines)[-LOG_LIMIT:]]
    assert len(saved[0]) == LOG_LIMIT
    assert managed(fake) == set() and fake.objects(kinds=("Pod",)) == []


def test_teardown_twice_is_safe(fake, client, workflow, saved):
    on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    assert on_teardown(workflow, client, saved.append) is True
    assert on_teardown(workflow, client, saved.append) is False
    assert len(saved) <= 1


def test_teardown_without_a_minicluster_does_nothing(fake, client, workflow, saved):
    assert on_teardown(workflow, client, saved.append) is False
    assert saved == [] and fake.seen("DELETE") == []


def test_teardown_looks_once_and_only_for_the_clients_kind(fake, client, workflow, saved):
    """One GET per Workflow at Teardown, whatever else the cluster serves:
    no JobSet or MiniCluster lookups a Job client never made (nor the RBAC
    they would need)."""
    before = len(fake.requests)
    assert on_teardown(workflow, client, saved.append) is False
    assert [(r.verb, r.path) for r in fake.requests[before:]] == [
        ("GET", "/apis/batch/v1/namespaces/default/jobs/fluxjob-1234")
    ]


def made_for(workflow, client):
    """The MiniCluster on_pre_run makes, without waiting for it to come up
    (these tests tear down pods that never do)."""
    flow = Workflow.from_object(workflow)
    spec = RabbitRequest.from_jobspec(COMMAND_JOB).to_minicluster(
        RABBITS, name=flow.name, namespace=flow.namespace, uid=OWNER.uid, gid=OWNER.gid,
        workflow=flow,
    )  # fmt: skip
    client.backend.create(spec, client.target, owners=[flow.owner_reference])


@pytest.fixture
def nnf(kubeconfig):
    """A fake API server that serves NNF's kinds, and a client of it."""
    server = FakeAPIServer(crds=DEFAULT_CRDS | NNF_KINDS)
    try:
        with client_for(server, kubeconfig) as client:
            yield server, client
    finally:
        server.close()


def container_only(fake, **profile):
    """A Workflow with only a ``#DW container`` directive, its profile
    (``createContainer: false`` and ``profile``) and NnfContainerData listing
    no volume, as NNF leaves them at PreRun."""
    data = {"createContainer": False, **profile}
    fake.seed("NnfContainerProfile", {"metadata": {"name": "fluxjob-1234-0"}, "data": data})
    fake.seed("NnfContainerData", {"metadata": {"name": "fluxjob-1234-0"}, "data": {"volumes": []}})
    return workflow_object("#DW container name=mpi profile=p")


def test_pre_run_that_never_comes_up_is_said_and_deleted(nnf):
    fake, client = nnf
    fake.schedulable = False
    flow = container_only(fake, preRunTimeoutSeconds=1)
    said = r"timed out after 1s .* \(the container profile's preRunTimeoutSeconds\); the MiniCluster is deleted"
    with pytest.raises(RabbitError, match=said):
        on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert managed(fake) == set()


def test_pre_run_waits_for_the_instance_not_for_running_pods(nnf):
    # every pod runs, but rank 0's readinessProbe never passes (a broker that
    # cannot join): PreRun is not over until the instance is up
    fake, client = nnf
    fake.pods_ready = False
    flow = container_only(fake, preRunTimeoutSeconds=3)  # time for the pods to run
    said = r"timed out after 3s .*fluxjob-1234-0-\w+ runs but is not Ready: its Flux instance is not up"
    with pytest.raises(RabbitError, match=said):
        on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert managed(fake) == set()


def test_a_worker_that_fails_as_it_starts_is_said_and_deleted(nnf):
    # rank 1's broker exits 1 at start: the instance never comes up, and
    # PreRun says which pod failed instead of waiting out the timeout
    fake, client = nnf
    fake.failing_ranks[1] = 1
    flow = container_only(fake)
    said = (r"^MiniCluster fluxjob-1234 failed as it came up: pod fluxjob-1234-1-\w+ \(rank 1\) "
            r"exited 1 and failed the Job, which stopped the other pods; the MiniCluster is deleted$")  # fmt: skip
    with pytest.raises(RabbitError, match=said):
        on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert managed(fake) == set()


def test_pre_run_mounts_what_nnf_data_lists(nnf):
    fake, client = nnf
    flow = workflow_object("#DW jobdw type=gfs2 capacity=1GiB name=scratch",
                           "#DW container name=mpi profile=p DW_JOB_scratch=scratch")  # fmt: skip
    fake.seed(
        "NnfContainerProfile",
        {"metadata": {"name": "fluxjob-1234-1"}, "data": {"createContainer": False}},
    )
    path = f"/mnt/nnf/{WORKFLOW_UID}-0"
    volume = {"name": "scratch", "command": "jobdw", "directiveIndex": 0, "mountPath": path}
    fake.seed(
        "NnfContainerData", {"metadata": {"name": "fluxjob-1234-1"}, "data": {"volumes": [volume]}}
    )
    on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    template = fake.get("Job", "fluxjob-1234")["spec"]["template"]["spec"]
    assert {"name": "rabbit-0", "hostPath": {"path": path, "type": "Directory"}} in template[
        "volumes"
    ]
    env = {e["name"]: e.get("value") for e in template["containers"][0]["env"]}
    assert env["DW_JOB_scratch"] == path


def test_a_profile_for_another_user_is_refused_before_anything_is_made(nnf):
    fake, client = nnf
    flow = workflow_object("#DW container name=mpi profile=p")
    fake.seed(
        "NnfContainerProfile", {"metadata": {"name": "fluxjob-1234-0"}, "data": {"userID": 7}}
    )
    with pytest.raises(
        RabbitError,
        match="container profile fluxjob-1234-0 is for userID 7 only, and the job's is 1001",
    ):
        on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert managed(fake) == set()


def test_another_users_workflow_is_refused_at_setup(workflow):
    with pytest.raises(RabbitError, match="Workflow fluxjob-1234 is userID 1001's, not 7's"):
        on_setup(COMMAND_JOB, workflow, RABBITS, Owner(uid=7, gid=2001))


def test_teardown_without_a_lead_pod_still_deletes(kubeconfig, workflow, saved):
    quiet = FakeAPIServer(controllers=False)  # no Job controller: no pods at all
    try:
        with client_for(quiet, kubeconfig) as client:
            made_for(workflow, client)
            assert on_teardown(workflow, client, saved.append) is True
        assert saved == [] and managed(quiet) == set()
    finally:
        quiet.close()


def test_teardown_of_pods_that_never_started(fake, client, workflow, saved):
    fake.schedulable = False
    made_for(workflow, client)
    assert on_teardown(workflow, client, saved.append) is True
    assert managed(fake) == set()


def test_teardown_of_pods_that_never_started_keeps_no_log_and_says_so(
    fake, client, workflow, saved, caplog
):
    fake.schedulable = False
    made_for(workflow, client)
    assert on_teardown(workflow, client, saved.append) is True
    assert saved == []
    assert "no log kept" in caplog.text or "lost the log" in caplog.text


def test_teardown_deletes_even_when_saving_the_log_fails(fake, client, workflow):
    name = on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    client.wait(name, timeout=30)

    def broken(text: str) -> None:
        raise OSError("KVS unavailable")

    with pytest.raises(OSError, match="KVS unavailable"):
        on_teardown(workflow, client, broken)
    assert managed(fake) == set()


def test_teardown_leaves_another_workflows_minicluster_alone(fake, client, workflow, saved):
    on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    stranger = workflow_object()
    stranger["metadata"]["uid"] = "another-uid"
    assert on_teardown(stranger, client, saved.append) is False
    assert ("Job", "fluxjob-1234") in managed(fake)


def test_teardown_leaves_objects_fluxhop_did_not_make_alone(fake, client, workflow, saved):
    client.ops.kube.apply(foreign_job("fluxjob-1234"))
    assert on_teardown(workflow, client, saved.append) is False
    assert fake.get("Job", "fluxjob-1234") is not None and saved == []


def test_deleting_the_workflow_collects_everything(fake, client, workflow):
    on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    fake.owner_deleted(WORKFLOW_UID)
    assert managed(fake) == set()


def test_minicluster_target_for_sites_with_the_flux_operator(fake, kubeconfig, workflow, saved):
    with client_for(fake, kubeconfig, target="minicluster") as client:
        name = on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
        cr = fake.get("MiniCluster", name)
        assert cr["metadata"]["ownerReferences"][0]["uid"] == WORKFLOW_UID
        assert cr["spec"]["pod"]["nodeSelector"] == {"cray.nnf.node": "true"}
        client.wait(name, timeout=30)
        assert on_teardown(workflow, client, saved.append) is True
        assert saved == ["hello from rank 0\n"]
        assert fake.objects(kinds=("MiniCluster", "Job", "Pod")) == []


def test_owner_may_be_a_uid_looked_up_on_this_host(fake, client):
    import os

    mine = workflow_object()
    mine["spec"].update(userID=os.getuid(), groupID=os.getgid())
    on_pre_run(COMMAND_JOB, mine, RABBITS, os.getuid(), client)
    job = fake.get("Job", "fluxjob-1234")
    context = job["spec"]["template"]["spec"]["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (os.getuid(), os.getgid())


@pytest.mark.parametrize(
    ("pieces", "limit", "expected"),
    [
        (["abc\n", "def\n"], 100, "abc\ndef\n"),
        (["abc\n", "def\n"], 5, "\ndef\n"),
        (["abcdef"], 3, "def"),
        ([], 3, ""),
    ],
)
def test_tail(pieces, limit, expected):
    assert tail(iter(pieces), limit) == expected


def test_post_run_gives_rank_0s_exit_code_keeps_its_log_and_deletes(fake, client, workflow, saved):
    fake.runner = lambda pod, index: (["the end\n"] if index == 0 else [], 3 if index == 0 else 0)
    name = on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    client.wait(name, timeout=30)
    assert on_post_run(workflow, client, saved.append) == 3
    assert "the end" in saved[0] and managed(fake) == set()
    assert on_teardown(workflow, client, saved.append) is False  # nothing left for Teardown


def test_post_run_returns_once_the_pods_are_gone(fake, client, workflow, saved):
    """NNF unmounts the file systems once PostRun returns: the pods the
    garbage collector deletes stop within their grace period, and PostRun
    waits for them (on a real cluster they outlive their Job a while)."""
    fake.collected_pods_linger = 40  # controller steps
    name = on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    client.wait(name, timeout=30)
    assert on_post_run(workflow, client, saved.append) == 0
    assert fake.objects(kinds=("Pod",)) == []


def test_post_run_of_another_workflows_minicluster_says_nothing_of_it(
    fake, client, workflow, saved
):
    on_pre_run(COMMAND_JOB, workflow, RABBITS, OWNER, client)
    stranger = workflow_object()
    stranger["metadata"]["uid"] = "another-uid"
    assert on_post_run(stranger, client, saved.append) is None
    assert ("Job", "fluxjob-1234") in managed(fake) and saved == []


@pytest.mark.parametrize(
    "variable", ["DW_JOB_scratch", "DW_JOB_scratch_DIRECTORIES", "DW_JOB_named_fs"]
)
def test_a_job_variable_the_workflow_announces_is_refused_before_any_request(
    fake, client, variable
):
    flow = workflow_object("#DW jobdw type=gfs2 capacity=1GiB name=scratch",
                           "#DW container name=mpi profile=p DW_JOB_named_fs=scratch")  # fmt: skip
    job = rabbit_job({"image": "lammps:cxi", "env": {variable: "/elsewhere"}})
    with pytest.raises(RabbitError, match=rf"rabbit\.mpi\.env\.{variable} is set by the workflow"):
        on_setup(job, flow, RABBITS, OWNER)
    with pytest.raises(RabbitError, match=rf"rabbit\.mpi\.env\.{variable} is set by the workflow"):
        on_pre_run(job, flow, RABBITS, OWNER, client)
    assert fake.requests == []


def test_a_global_lustre_without_the_lustre_operator_is_one_line_and_makes_nothing(nnf):
    """DW_GLOBAL_ needs NNF's Lustre operator's LustreFileSystems (this fake
    serves none, as a cluster without the operator)."""
    fake, client = nnf
    flow = workflow_object("#DW container name=mpi profile=p DW_GLOBAL_home=/lus/home/alice")
    fake.seed("NnfContainerProfile",
              {"metadata": {"name": "fluxjob-1234-0"}, "data": {"createContainer": False}})  # fmt: skip
    fake.seed("NnfContainerData", {"metadata": {"name": "fluxjob-1234-0"}, "data": {"volumes": []}})
    with pytest.raises(RabbitError) as caught:
        on_pre_run(COMMAND_JOB, flow, RABBITS, OWNER, client)
    assert str(caught.value) == (
        "'#DW container name=mpi profile=p DW_GLOBAL_home=/lus/home/alice' names a global Lustre "
        "file system (DW_GLOBAL_), and this cluster serves no LustreFileSystem (lus.cray.hpe.com): "
        "install NNF's Lustre operator"
    )
    assert managed(fake) == set()
