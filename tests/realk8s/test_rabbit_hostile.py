"""The rabbit hooks under hostile DWS input, on DWS's real controller and
webhook (issue #57 item 3; tests/hostile/test_rabbit.py is the fast tier's
pass over every field): a pinned container profile fluxhop cannot serve
that NNF's schema and DWS's webhook let through, ClientMounts that name
other Workflows, the Workflow deleted while PreRun waits, and the hooks
called out of order. Each refusal is one line, which DWS takes as the
Workflow's ``status.message``; PreRun makes nothing (or nothing is left of
what it made), and Teardown finds nothing to delete."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

import fluxhop
from fluxhop.cluster.api import Kube
from fluxhop.rabbit.hooks import on_post_run, on_pre_run, on_teardown
from fluxhop.rabbit.nnf import read_nnf
from fluxhop.rabbit.workflow import Workflow
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.dws import DWS_API, NNF_API
from tests.realk8s.rabbit_site import (
    CONTAINER,
    OWNER,
    RABBITS,
    SCRATCH,
    cordon,
    made,
    rabbit_job,
)
from tests.realk8s.tools import eventually
from tests.realk8s.wlm import Wlm

pytestmark = pytest.mark.usefixtures("needs_flux")

WORKFLOW_NAME = "dataworkflowservices.github.io/workflow.name"
OWNER_NAME = "dataworkflowservices.github.io/owner.name"


def refused(machine: Wlm, name: str, call: Callable[[], Any]) -> str:
    """The one line a hook refused with, as DWS records it in the Workflow."""
    with pytest.raises(fluxhop.errors.FluxhopError) as caught:
        call()
    line = str(caught.value)
    assert line and "\n" not in line, line
    # what a workload manager does with it: the Workflow's status.message (it
    # has no status subresource; DWS's webhook lets a change in no state pass)
    stored = machine.admin.patch(machine.path(name), {"status": {"message": line}}, "merge")
    assert stored["status"]["message"] == line
    return line


def jobs(admin: Api, ns: str) -> list[dict[str, Any]]:
    return list(admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"])


def _create_container(data: dict[str, Any]) -> None:
    data["createContainer"] = True


def _another_user(data: dict[str, Any]) -> None:
    data["userID"] = OWNER.uid + 4242


def _another_group(data: dict[str, Any]) -> None:
    data["groupID"] = OWNER.gid + 4242


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_create_container, "NnfContainerProfile {}-1 data.createContainer is true"),
        (_another_user, f"container profile {{}}-1 is for userID {OWNER.uid + 4242} only"),
        (_another_group, f"container profile {{}}-1 is for groupID {OWNER.gid + 4242} only"),
        (None, "no NnfContainerProfile {}-1 for"),
    ],
    ids=["create-container", "another-user", "another-group", "unpinned"],
)
def test_a_pinned_profile_it_cannot_serve_is_one_line_and_makes_nothing(
    cluster: LocalCluster, machine: Wlm, admin: Api, request: pytest.FixtureRequest,
    change: Callable[[dict[str, Any]], None] | None, said: str,
):  # fmt: skip
    """NNF's schema and DWS's webhook take each of these profiles; fluxhop
    cannot run a MiniCluster under it (NNF would start the pods itself,
    another owner's, or none pinned)."""
    name, ns = f"fluxjob-{request.node.callspec.id}", machine.namespace
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    seen: list[str] = []

    def pre_run(flow: dict[str, Any]) -> None:
        path = f"{NNF_API}/namespaces/{ns}/nnfcontainerprofiles/{name}-1"
        if change is None:
            admin.delete(path)
        else:
            profile = admin.get(path)
            change(profile["data"])
            admin.replace(path, profile)  # as if NNF had pinned that
        seen.append(refused(machine, name, lambda: on_pre_run(
            rabbit_job("hostname"), flow, RABBITS, OWNER, client, cxi_resource=None,
            mount_root=str(machine.nnf.prefix))))  # fmt: skip
        assert jobs(admin, ns) == [] and made(admin, ns, name) == {}

    def teardown(flow: dict[str, Any]) -> None:
        assert on_teardown(flow, client, seen.append) is False  # nothing to delete

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"PreRun": pre_run, "Teardown": teardown})
    finally:
        client.close()
    assert len(seen) == 1 and seen[0].startswith(said.format(name)), seen
    machine.finish(name)


def test_client_mounts_of_other_workflows_are_not_taken(cluster: LocalCluster, machine: Wlm,
                                                        admin: Api):  # fmt: skip
    """Beside the ClientMounts NNF made for the Workflow, in a compute's
    namespace: one labelled for another Workflow that names this one's
    NnfAccess, and one labelled for this Workflow made for another's
    NnfAccess, each giving compute-1 another directory. The directories
    PreRun reads are NNF's own."""
    name, ns = "fluxjob-mounts", machine.namespace
    seen: dict[str, Any] = {}

    def pre_run(flow: dict[str, Any]) -> None:
        collection = f"{DWS_API}/namespaces/compute-1/clientmounts"
        (ours,) = [m for m in admin.get(collection)["items"]
                   if m["metadata"]["labels"].get(WORKFLOW_NAME) == name]  # fmt: skip
        strangers = []
        for suffix, workflow, access in (("theirs", "fluxjob-other", f"{name}-0-computes"),
                                         ("misowned", name, "fluxjob-other-0-computes")):  # fmt: skip
            mount = copy.deepcopy(ours)
            mount["metadata"] = {"name": f"{name}-{suffix}", "labels": {
                **ours["metadata"]["labels"], WORKFLOW_NAME: workflow, OWNER_NAME: access}}  # fmt: skip
            mount["spec"]["mounts"][0]["device"]["deviceReference"]["data"] = 7
            mount["spec"]["mounts"][0]["device"]["deviceReference"]["objectReference"][
                "namespace"] = "elsewhere"  # fmt: skip
            mount.pop("status", None)
            strangers.append(admin.create(collection, mount))
        kube = Kube.connect(str(cluster.admin_kubeconfig), namespace=ns)
        try:
            view = read_nnf(kube, Workflow.from_object(flow), OWNER.uid, OWNER.gid,
                            str(machine.nnf.prefix))  # fmt: skip
        finally:
            kube.close()
            for mount in strangers:
                admin.delete(f"{collection}/{mount['metadata']['name']}")
        seen["directories"] = {v.name: dict(v.directories) for v in view.storage}

    machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
    machine.run(name, {"PreRun": pre_run}, until="PreRun")
    expected = {"compute-1": f"{RABBITS[0]}-0", "compute-2": f"{RABBITS[0]}-1",
                "compute-3": f"{RABBITS[1]}-0"}  # fmt: skip
    assert seen["directories"] == {"scratch": expected}, seen
    machine.finish(name)


def test_the_workflow_deleted_while_pre_run_waits_ends_it_in_one_line(
    cluster: LocalCluster, machine: Wlm, admin: Api
):
    """PreRun made the MiniCluster (owned by the Workflow) and waits for its
    pods, which cannot be placed (the rabbits cordoned). The Workflow is
    deleted: the garbage collector takes the MiniCluster, and PreRun ends at
    once in one line, not at the profile's preRunTimeoutSeconds (300 s)."""
    name, ns = "fluxjob-gone", machine.namespace
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    ended: list[BaseException | None] = []

    def pre_run(flow: dict[str, Any]) -> None:
        def hook() -> None:
            try:
                on_pre_run(rabbit_job("hostname"), flow, RABBITS, OWNER, client,
                           cxi_resource=None, mount_root=str(machine.nnf.prefix))  # fmt: skip
            except BaseException as err:  # handed to the test
                ended.append(err)
            else:
                ended.append(None)

        cordon(admin, True)
        waiting = threading.Thread(target=hook, daemon=True)
        try:
            waiting.start()
            eventually("PreRun made its Job",
                       lambda: admin.find(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"), 120)  # fmt: skip
            admin.delete(machine.path(name))
            eventually("PreRun ended", lambda: bool(ended), 120)
        finally:
            cordon(admin, False)

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"PreRun": pre_run}, until="PreRun")
    finally:
        client.close()
    (error,) = ended
    assert isinstance(error, fluxhop.errors.FluxhopError), error
    assert str(error) == f"MiniCluster {name} was deleted, and its pods with it", error
    eventually("the Workflow gone", lambda: admin.find(machine.path(name)) is None, 120)
    eventually("nothing left of the MiniCluster", lambda: made(admin, ns, name) == {}, 120)


def test_the_hooks_out_of_order_touch_nothing(cluster: LocalCluster, machine: Wlm, admin: Api):
    """At Setup, before NNF wrote what PreRun reads: PostRun and Teardown
    find nothing, and PreRun is one line; then the job runs as usual."""
    name, ns = "fluxjob-early", machine.namespace
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    seen: list[Any] = []

    def setup(flow: dict[str, Any]) -> None:
        seen.append(on_post_run(flow, client, seen.append))
        seen.append(on_teardown(flow, client, seen.append))
        seen.append(refused(machine, name, lambda: on_pre_run(
            rabbit_job("hostname"), flow, RABBITS, OWNER, client, cxi_resource=None,
            mount_root=str(machine.nnf.prefix))))  # fmt: skip
        assert jobs(admin, ns) == [] and made(admin, ns, name) == {}

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"Setup": setup}, until="Setup")
    finally:
        client.close()
    assert seen[:2] == [None, False], seen
    assert seen[2].startswith(f"no NnfContainerData {name}-1 for "), seen
    assert len(seen) == 3, seen
    machine.finish(name)
