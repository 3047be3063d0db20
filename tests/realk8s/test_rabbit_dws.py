"""A rabbit MiniCluster on DWS's real Workflow machine (issue #36 item 2):
the workload manager (tests/realk8s/wlm.py) takes a job's Workflow through
its states, NNF's side (tests/realk8s/nnf.py) mounts a GFS2 file system on
the rabbits (two of the test cluster's nodes, labelled as NNF labels its
rabbits) and writes NnfContainerData for the ``#DW container`` directive,
and fluxhop's hooks run at Setup (checks), PreRun (creates the MiniCluster
mounting what NNF listed, returns once it is up), PostRun (rank 0's exit
code and log, then deletes it) and Teardown (nothing left). The
brokers are real Flux; the file each task writes under ``$DW_JOB_scratch``
lands in the host directory NNF's side made for the file system."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import fluxhop
from fluxhop.rabbit.hooks import on_post_run, on_pre_run, on_setup, on_teardown
from fluxhop.rabbit.policy import Owner
from tests.realk8s.api import Api
from tests.realk8s.cleanup import RUN_DIR
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.dws import Dws
from tests.realk8s.nnf import PROFILE
from tests.realk8s.tools import eventually
from tests.realk8s.wlm import Wlm, rabbit_machine

pytestmark = pytest.mark.usefixtures("needs_flux")

RABBITS = ("node-a", "node-b")  # the test cluster's nodes that play rabbits
COMPUTES = {"compute-1": "node-a", "compute-2": "node-a", "compute-3": "node-b"}
RABBIT_LABEL = "cray.nnf.node"
OWNER = Owner(uid=0, gid=0, user="root", groups=())
SCRATCH = "#DW jobdw type=gfs2 capacity=10GiB name=scratch"
CONTAINER = f"#DW container name=mpi profile={PROFILE} DW_JOB_scratch=scratch"
# each task leaves a file named after its pod where NNF mounted the file system,
# and says which directory of it is each compute node's
COMMAND = (
    'sh -c \'hostname > "$DW_JOB_scratch/$(hostname)"; echo "wrote $DW_JOB_scratch"; '
    'echo "dirs $DW_JOB_scratch_DIRECTORIES"\''
)


def rabbit_job(command: str) -> dict[str, Any]:
    mpi = {"command": command, "nodes": len(RABBITS), "add_flux": False}
    return {"attributes": {"system": {"rabbit": {"mpi": mpi}}}}


@pytest.fixture(scope="module")
def rabbits(cluster: LocalCluster) -> Iterator[None]:
    """The rabbit nodes labelled as NNF labels them (the MiniCluster's node selector)."""
    with cluster.admin() as admin:
        for node in RABBITS:
            admin.patch(
                f"/api/v1/nodes/{node}", {"metadata": {"labels": {RABBIT_LABEL: "true"}}}, "merge"
            )
        try:
            yield
        finally:
            for node in RABBITS:
                admin.patch(
                    f"/api/v1/nodes/{node}", {"metadata": {"labels": {RABBIT_LABEL: None}}}, "merge"
                )


@pytest.fixture(scope="module")
def machine(cluster: LocalCluster, dws: Dws, rabbits: None) -> Iterator[Wlm]:
    prefix = RUN_DIR / "nnf"  # where the pods see the host's files
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        with rabbit_machine(cluster, prefix, COMPUTES) as wlm:
            yield wlm
    finally:
        for path in sorted(prefix.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        prefix.rmdir()


def test_a_rabbit_minicluster_mounts_what_nnf_listed_and_its_files_land_there(
    cluster: LocalCluster, machine: Wlm
):
    name, ns, admin = "fluxjob-1", machine.namespace, machine.admin
    jobspec = rabbit_job(COMMAND)
    saved: list[str] = []
    ended: dict[str, Any] = {}
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    root = str(machine.nnf.prefix)

    def setup(flow: dict[str, Any]) -> None:
        assert on_setup(jobspec, flow, RABBITS, OWNER) == name
        assert admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"] == []  # nothing made

    def pre_run(flow: dict[str, Any]) -> None:
        assert (
            on_pre_run(jobspec, flow, RABBITS, OWNER, client, cxi_resource=None, mount_root=root)
            == name
        )

    def post_run(flow: dict[str, Any]) -> None:
        client.wait(name, timeout=300)  # the job's end, which the workload manager waits for
        ended["code"] = on_post_run(flow, client, saved.append)

    def teardown(flow: dict[str, Any]) -> None:
        assert on_teardown(flow, client, saved.append) is False  # PostRun left nothing

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        flow = machine.run(name, {"Setup": setup, "PreRun": pre_run, "Teardown": teardown},
                           before={"PostRun": post_run})  # fmt: skip
    finally:
        client.close()
    server = machine.nnf.server_path(flow, 0)
    pods = sorted(p.name for p in server.iterdir() if not p.name.startswith("node-"))
    assert pods == [f"{name}-0", f"{name}-1"], sorted(server.iterdir())
    assert f"wrote {server}" in saved[0]
    assert "dirs compute-1=node-a-0 compute-2=node-a-1 compute-3=node-b-0" in saved[0], saved
    assert ended["code"] == 0 and len(saved) == 1, (ended, saved)
    machine.finish(name)
    eventually("the MiniCluster's objects gone",
               lambda: not admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"], 120)  # fmt: skip


def _volumes_none(volumes: list[dict[str, Any]]) -> None:
    volumes.clear()


def _outside(volumes: list[dict[str, Any]]) -> None:
    volumes[0]["mountPath"] = "/etc"


def _relative(volumes: list[dict[str, Any]]) -> None:
    volumes[0]["mountPath"] = "mnt/nnf/x"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_volumes_none, f"NnfContainerData {{}}-1 lists no volume 'scratch' (directive 0), which "
                        f"'{CONTAINER}' names; NNF has not mounted it"),
        (_outside, "NnfContainerData {}-1 data.volumes[0].mountPath '/etc' is outside NNF's mount root"),
        (_relative, "NnfContainerData {}-1 data.volumes[0].mountPath 'mnt/nnf/x' is relative"),
    ],
    ids=["missing", "outside", "relative"],
)  # fmt: skip
def test_bad_nnf_data_is_one_line_and_makes_nothing(cluster: LocalCluster, machine: Wlm, admin: Api,
                                                    change: Any, said: str):  # fmt: skip
    # a name of its own: the last case's NnfContainerData may not be collected yet
    name, ns = f"fluxjob-bad-{change.__name__.strip('_').replace('_', '-')}", machine.namespace
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    seen: list[str] = []

    def pre_run(flow: dict[str, Any]) -> None:
        path = f"/apis/nnf.cray.hpe.com/v1alpha11/namespaces/{ns}/nnfcontainerdata/{name}-1"
        data = admin.get(path)
        change(data["data"]["volumes"])  # as if NNF had written that
        admin.replace(path, data)
        with pytest.raises(fluxhop.errors.FluxhopError) as caught:
            on_pre_run(rabbit_job(COMMAND), flow, RABBITS, OWNER, client, cxi_resource=None,
                       mount_root=str(machine.nnf.prefix))  # fmt: skip
        seen.append(str(caught.value))

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"PreRun": pre_run}, until="PreRun")
    finally:
        client.close()
    assert len(seen) == 1 and seen[0].startswith(said.format(name)) and "\n" not in seen[0], seen
    assert admin.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"] == []
    machine.finish(name)


def test_without_a_container_directive_each_servers_access_says_where(
    cluster: LocalCluster, machine: Wlm
):
    """No ``#DW container`` directive: a Lustre file system is mounted from
    its ``-servers`` NnfAccess mountPath, and an XFS one (per compute, not
    mountable twice) gets no volume."""
    name, ns = "fluxjob-3", machine.namespace
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    saved: list[str] = []
    command = 'sh -c \'hostname > "$DW_JOB_big/$(hostname)"; echo "local ${DW_JOB_local:-none}"\''
    directives = [
        "#DW jobdw type=lustre capacity=1TiB name=big",
        "#DW jobdw type=xfs capacity=1GiB name=local",
    ]

    def pre_run(flow: dict[str, Any]) -> None:
        on_pre_run(rabbit_job(command), flow, RABBITS, OWNER, client, cxi_resource=None,
                   mount_root=str(machine.nnf.prefix))  # fmt: skip

    def post_run(flow: dict[str, Any]) -> None:
        client.wait(name, timeout=300)
        assert on_post_run(flow, client, saved.append) == 0

    try:
        machine.create(name, directives, uid=OWNER.uid, gid=OWNER.gid)
        flow = machine.run(name, {"PreRun": pre_run}, before={"PostRun": post_run}, until="PostRun")
    finally:
        client.close()
    server = machine.nnf.server_path(flow, 0)
    assert sorted(p.name for p in server.iterdir()) == [f"{name}-0", f"{name}-1"]
    assert "local none" in saved[0], saved
    machine.finish(name)
