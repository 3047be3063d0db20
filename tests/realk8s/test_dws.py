"""DWS's real Workflow machine on the test cluster (issue #36 item 1): its
webhook registers NNF as the driver of each state a directive's rule
watches and refuses what DWS refuses; NNF's side (tests/realk8s/nnf.py)
and the workload manager's (tests/realk8s/wlm.py) take a Workflow from
Proposal to Teardown through the real controller, every update they make
accepted by the webhook."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.dws import DWS_API, NNF_API, Dws
from tests.realk8s.nnf import PROFILE, PROFILES, container_profile
from tests.realk8s.tools import eventually
from tests.realk8s.wlm import STATES, Wlm, rabbit_machine

COMPUTES = {"compute-1": "rabbit-a", "compute-2": "rabbit-a", "compute-3": "rabbit-b"}
UID, GID = 1001, 2001
SCRATCH = "#DW jobdw type=gfs2 capacity=10GiB name=scratch"
CONTAINER = f"#DW container name=mpi profile={PROFILE} DW_JOB_scratch=scratch"


@pytest.fixture(scope="module")
def machine(
    cluster: LocalCluster, dws: Dws, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Wlm]:
    with rabbit_machine(cluster, tmp_path_factory.mktemp("rabbits"), COMPUTES) as wlm:
        yield wlm


def _drivers(flow: dict[str, Any]) -> Counter[tuple[str, int, str]]:
    return Counter(
        (d["driverID"], d["dwdIndex"], d["watchState"]) for d in flow["status"]["drivers"]
    )


def test_the_webhook_registers_nnf_for_every_state_its_rules_watch(machine: Wlm):
    flow = machine.create("registered", [SCRATCH, CONTAINER], uid=UID, gid=GID)
    watched = ("Proposal", "Setup", "PreRun", "PostRun", "Teardown")  # jobdw's and container's
    assert _drivers(flow) == Counter(("nnf", i, s) for i in (0, 1) for s in watched)
    assert all(d["status"] == "Pending" and not d["completed"] for d in flow["status"]["drivers"])
    assert flow["status"]["env"] == {"DW_WORKFLOW_NAME": "registered",
                                     "DW_WORKFLOW_NAMESPACE": machine.namespace}  # fmt: skip
    machine.finish("registered")


@pytest.mark.parametrize(
    ("directive", "said"),
    [
        ("#DW jobdw type=ext4 capacity=10GiB name=scratch", "type"),
        ("#DW jobdw type=gfs2 name=scratch", "capacity"),
        ("#DW nosuch name=x", "nosuch"),
    ],
)
def test_the_webhook_refuses_a_directive_nnf_does_not_handle(
    machine: Wlm, directive: str, said: str
):
    with pytest.raises(ApiError) as refused:
        machine.create("refused", [directive], uid=UID, gid=GID)
    assert refused.value.status in (400, 403) and said in refused.value.message, refused.value


def test_a_state_cannot_be_skipped_nor_left_before_it_is_ready(machine: Wlm):
    machine.create("strict", [SCRATCH], uid=UID, gid=GID)
    machine.reach("strict", "Proposal")
    flow = machine.admin.get(machine.path("strict"))
    flow["spec"]["desiredState"] = "PreRun"
    with pytest.raises(ApiError, match="states cannot be skipped"):
        machine.admin.replace(machine.path("strict"), flow)
    machine.finish("strict")


def test_a_workflow_goes_from_proposal_to_teardown_with_nnf_s_objects(machine: Wlm):
    """At PreRun: NnfContainerData lists the file system the container
    directive names at the servers' NnfAccess mountPath; GFS2 has a
    directory per compute each rabbit serves (<rabbit>-<k>) and each
    compute's ClientMount names its k; DW_JOB_scratch is in the
    Workflow's env. At Teardown the storage objects are gone."""
    seen: dict[str, dict[str, Any]] = {}
    name = "whole"
    machine.create(name, [SCRATCH, CONTAINER], uid=UID, gid=GID)
    admin, ns = machine.admin, machine.namespace

    def pre_run(flow: dict[str, Any]) -> None:
        seen["flow"] = flow
        seen["data"] = admin.get(f"{NNF_API}/namespaces/{ns}/nnfcontainerdata/{name}-1")
        seen["access"] = admin.get(f"{NNF_API}/namespaces/{ns}/nnfaccesses/{name}-0-servers")
        seen["mounts"] = {c: admin.get(f"{DWS_API}/namespaces/{c}/clientmounts/{ns}-{name}-0-computes")
                          for c in COMPUTES}  # fmt: skip

    machine.run(name, {"PreRun": pre_run})
    server = seen["access"]["spec"]["mountPath"]
    uid = seen["flow"]["metadata"]["uid"]
    assert server.endswith(f"/{uid}-0")
    assert seen["data"]["data"]["volumes"] == [
        {"name": "scratch", "command": "jobdw", "directiveIndex": 0, "mountPath": server}
    ]
    assert sorted(p.name for p in Path(server).iterdir()) == [
        "rabbit-a-0",
        "rabbit-a-1",
        "rabbit-b-0",
    ]
    ks = {c: m["spec"]["mounts"][0]["device"]["deviceReference"] for c, m in seen["mounts"].items()}
    assert {c: (r["objectReference"]["namespace"], r["data"]) for c, r in ks.items()} == {
        "compute-1": ("rabbit-a", 0), "compute-2": ("rabbit-a", 1), "compute-3": ("rabbit-b", 0),
    }  # fmt: skip
    assert seen["flow"]["status"]["env"]["DW_JOB_scratch"] == f"/mnt/nnf/{uid}-0"
    assert [s.split()[0] for s in machine.nnf.seen if s.endswith(f" {name}")] == [
        s for s in STATES if s not in ("DataIn", "DataOut")
    ]
    assert admin.find(f"{NNF_API}/namespaces/{ns}/nnfaccesses/{name}-0-servers") is None
    machine.finish(name)  # NnfContainerData has no directive label: it goes with the Workflow
    eventually("its NnfContainerData collected",
               lambda: admin.find(f"{NNF_API}/namespaces/{ns}/nnfcontainerdata/{name}-1") is None)  # fmt: skip


def test_a_profile_restricted_to_another_user_is_an_error_on_the_workflow(machine: Wlm, admin: Api):
    admin.apply(f"{NNF_API}/namespaces/{PROFILES}/nnfcontainerprofiles/theirs",
                container_profile("theirs", userID=UID + 1), "test")  # fmt: skip
    name = "not-mine"
    machine.create(name, [SCRATCH, CONTAINER.replace(PROFILE, "theirs")], uid=UID, gid=GID)

    def failed() -> dict[str, Any] | None:
        machine.nnf.serve(machine.namespace, name)
        flow = machine.admin.get(machine.path(name))
        return flow if (flow.get("status") or {}).get("status") == "Error" else None

    flow = eventually("the Workflow in Error", failed)
    assert flow["status"]["message"].startswith("DW Directive 1: ")
    assert "restricted to userID" in flow["status"]["message"]
    machine.finish(name)
