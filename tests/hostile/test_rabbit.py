"""The rabbit hooks under hostile DWS input (issue #57, item 3, the fast
tier's part): every field of a Workflow, of the NnfContainerProfile NNF
pinned and of the NnfContainerData it wrote, given a value of another type,
an absurd one or none at all. Each hook either does its work or answers
with one line (a FluxhopError, the job exception a workload manager
records), never another exception; and a PreRun that refused leaves
nothing, one that did its work leaves nothing after Teardown."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

import fluxhop
from fluxhop.errors import FluxhopError
from fluxhop.rabbit.hooks import on_post_run, on_pre_run, on_setup, on_teardown
from fluxhop.rabbit.policy import Owner
from tests.cluster.fakeapi import DEFAULT_CRDS, NNF_KINDS, FakeAPIServer
from tests.rabbit.conftest import RABBITS, WORKFLOW_UID, rabbit_job, workflow_object

OWNER = Owner(uid=1001, gid=2001, user="alice", groups=("hpc",))
JOB = rabbit_job({"image": "lammps:cxi", "command": "lmp -in in.reaxc", "nodes": 2})
KINDS = ("ConfigMap", "Secret", "Service", "NetworkPolicy", "Job", "MiniCluster")
DROP = object()  # the field taken away
# of another type, absurd, or none
HOSTILE = [DROP, None, "", "x" * 300 + "\n#DW", -1, 2**63, 1.5, True, [], {}, ["#DW"]]


def leaves(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every field of ``doc``, containers and leaves alike."""
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for key, value in items:
        yield (*path, key)
        yield from leaves(value, (*path, key))


def put(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is DROP:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def mutated(doc: Any, skip: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    return [
        (f"{'.'.join(map(str, path))}={'drop' if value is DROP else repr(value)[:12]}",
         put(doc, path, value))
        for path in leaves(doc) if path[0] not in skip
        for value in HOSTILE
    ]  # fmt: skip


def one_line(error: FluxhopError) -> str:
    said = str(error)
    assert said and "\n" not in said, repr(said)
    return said


# --- Setup: the Workflow as the workload manager hands it over --------------------


WORKFLOW = workflow_object(
    "#DW jobdw type=gfs2 capacity=1GiB name=scratch",
    "#DW container name=mpi profile=p DW_JOB_scratch=scratch",
)
WORKFLOWS = mutated(WORKFLOW, skip=("apiVersion", "kind"))


@pytest.mark.parametrize("flow", [doc for _, doc in WORKFLOWS], ids=[i for i, _ in WORKFLOWS])
def test_setup_answers_a_hostile_workflow_in_one_line(flow: dict[str, Any]):
    try:
        name = on_setup(JOB, flow, RABBITS, OWNER)
    except FluxhopError as error:
        one_line(error)
    else:
        assert isinstance(name, str) and name


# --- PreRun: what NNF wrote -----------------------------------------------------


PATH = f"/mnt/nnf/{WORKFLOW_UID}-0"
PROFILE = {"metadata": {"name": "fluxjob-1234-1"},
           "data": {"createContainer": False, "preRunTimeoutSeconds": 30,
                    "userID": 1001, "groupID": 2001}}  # fmt: skip
DATA = {"metadata": {"name": "fluxjob-1234-1"},
        "data": {"volumes": [{"name": "scratch", "command": "jobdw", "directiveIndex": 0,
                              "mountPath": PATH}]}}  # fmt: skip
NNF = [(f"profile.{i}", doc, DATA) for i, doc in mutated(PROFILE, skip=("metadata",))] + [
    (f"data.{i}", PROFILE, doc) for i, doc in mutated(DATA, skip=("metadata",))
]


@pytest.fixture
def nnf(kubeconfig) -> Iterator[tuple[FakeAPIServer, fluxhop.Client]]:
    server = FakeAPIServer(crds=DEFAULT_CRDS | NNF_KINDS)
    try:
        with fluxhop.Client(kubeconfig=str(kubeconfig), transport=server.transport()) as client:
            yield server, client
    finally:
        server.close()


def made(fake: FakeAPIServer) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in fake.objects("default", KINDS)
            if o["kind"] != "Pod"}  # fmt: skip


@pytest.mark.parametrize(("profile", "data"), [(p, d) for _, p, d in NNF],
                         ids=[i for i, _, _ in NNF])  # fmt: skip
def test_pre_run_answers_hostile_nnf_objects_in_one_line_and_leaves_nothing(
    nnf: tuple[FakeAPIServer, fluxhop.Client], profile: dict[str, Any], data: dict[str, Any]
):
    fake, client = nnf
    fake.seed("NnfContainerProfile", copy.deepcopy(profile))
    fake.seed("NnfContainerData", copy.deepcopy(data))
    try:
        name = on_pre_run(JOB, WORKFLOW, RABBITS, OWNER, client)
    except FluxhopError as error:
        one_line(error)
        assert made(fake) == set()
        return
    assert name == "fluxjob-1234" and made(fake)
    assert on_teardown(WORKFLOW, client, lambda text: None)
    assert made(fake) == set()


def test_the_hostile_inputs_are_many():
    """The count the issue's note asks for: every field, every hostile value."""
    assert len(WORKFLOWS) > 100 and len(NNF) > 100


def test_hooks_called_out_of_order_or_twice_answer_and_leave_nothing(nnf):
    """PostRun and Teardown before any PreRun find nothing; after one PreRun,
    PostRun ends it, and every later hook finds nothing again."""
    fake, client = nnf
    fake.seed("NnfContainerProfile", copy.deepcopy(PROFILE))
    fake.seed("NnfContainerData", copy.deepcopy(DATA))
    kept: list[str] = []
    assert on_post_run(WORKFLOW, client, kept.append) is None
    assert on_teardown(WORKFLOW, client, kept.append) is False
    assert on_pre_run(JOB, WORKFLOW, RABBITS, OWNER, client) == "fluxjob-1234"
    assert on_pre_run(JOB, WORKFLOW, RABBITS, OWNER, client) == "fluxjob-1234"  # a retry
    on_post_run(WORKFLOW, client, kept.append)
    assert made(fake) == set()
    assert on_post_run(WORKFLOW, client, kept.append) is None
    assert on_teardown(WORKFLOW, client, kept.append) is False
    assert made(fake) == set()
