"""A rabbit MiniCluster on DWS's real Workflow machine (issue #36 item 2):
the workload manager (tests/realk8s/wlm.py) takes a job's Workflow through
its states, NNF's side (tests/realk8s/nnf.py) mounts a GFS2 file system and
a persistent (Lustre) one on the rabbits (two of the test cluster's nodes,
labelled as NNF labels its rabbits) and writes NnfContainerData for the
``#DW container`` directive,
and fluxhop's hooks run at Setup (checks), PreRun (creates the MiniCluster
mounting what NNF listed, returns once it is up), PostRun (rank 0's exit
code and log, then deletes it) and Teardown (nothing left). The
brokers are real Flux; the file each task writes under ``$DW_JOB_scratch``
(and ``$DW_PERSISTENT_project_data``) lands in the host directory NNF's side
made for the file system. Then: bad NNF data, the NnfAccess fallback, a
crash and retry at each hook, a MiniCluster not up in the profile's time,
and a global Lustre file system mounted through its claim."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fluxhop
from fluxhop.rabbit.hooks import on_post_run, on_pre_run, on_setup, on_teardown
from tests.examples.gallery import EXAMPLES, read
from tests.realk8s.api import Api
from tests.realk8s.cleanup import RUN_DIR
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.controllers import established
from tests.realk8s.dws import NNF_API
from tests.realk8s.nnf import LUS_API, PROFILES, container_profile, lustre_crd
from tests.realk8s.rabbit_site import (
    CONTAINER,
    DIRECTORIES,
    OWNER,
    RABBITS,
    SCRATCH,
    cordon,
    made,
    rabbit_job,
)
from tests.realk8s.tools import FLUXHOP, command_env, eventually, kubectl
from tests.realk8s.wlm import Wlm

pytestmark = pytest.mark.usefixtures("needs_flux")

PERSISTENT = "#DW persistentdw name=project-data"  # Lustre, as NNF's side makes it
BOTH = f"{CONTAINER} DW_PERSISTENT_project_data=project-data"
# each task leaves a file named after its pod where NNF mounted the file system,
# and says which directory of it is each compute node's
COMMAND = (
    'sh -c \'hostname > "$DW_JOB_scratch/$(hostname)"; echo "wrote $DW_JOB_scratch"; '
    'hostname > "$DW_PERSISTENT_project_data/$(hostname)"; '
    'echo "dirs $DW_JOB_scratch_DIRECTORIES"; echo "peers $NNF_CONTAINER_HOSTNAMES"; '
    'echo "on $NNF_NODE_NAME as $(hostname) ports $NNF_CONTAINER_PORTS mpi $NNF_CONTAINER_PORTS_mpi"; '
    'for h in $(echo "$NNF_CONTAINER_HOSTNAMES" | tr , " "); do '
    'getent hosts "$h.$NNF_CONTAINER_SUBDOMAIN.$NNF_CONTAINER_DOMAIN" >/dev/null && echo "resolves $h"; '
    "done'"
)


def test_a_rabbit_minicluster_mounts_what_nnf_listed_and_its_files_land_there(
    cluster: LocalCluster, machine: Wlm
):
    name, ns, admin = "fluxjob-1", machine.namespace, machine.admin
    jobspec = rabbit_job(COMMAND)
    saved: list[str] = []
    ended: dict[str, Any] = {}
    placed: dict[str, str] = {}  # pod (by rank) -> its rabbit
    published: list[list[int]] = []  # each pod's host ports
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
        pods = admin.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={name}")
        placed.update({p["metadata"]["name"].rsplit("-", 1)[0]: p["spec"]["nodeName"]
                       for p in pods["items"]})  # fmt: skip
        published.extend([port["hostPort"] for port in p["spec"]["containers"][0]["ports"]
                          if "hostPort" in port] for p in pods["items"])  # fmt: skip

    def post_run(flow: dict[str, Any]) -> None:
        client.wait(name, timeout=300)  # the job's end, which the workload manager waits for
        ended["code"] = on_post_run(flow, client, saved.append)

    def teardown(flow: dict[str, Any]) -> None:
        assert on_teardown(flow, client, saved.append) is False  # PostRun left nothing

    try:
        machine.create(name, [SCRATCH, PERSISTENT, BOTH], uid=OWNER.uid, gid=OWNER.gid)
        flow = machine.run(name, {"Setup": setup, "PreRun": pre_run, "Teardown": teardown},
                           before={"PostRun": post_run})  # fmt: skip
    finally:
        client.close()
    server = machine.nnf.server_path(flow, 0)
    pods = sorted(p.name for p in server.iterdir() if not p.name.startswith("node-"))
    assert pods == [f"{name}-0", f"{name}-1"], sorted(server.iterdir())
    persistent = machine.nnf.server_path(flow, 1)  # the persistent file system, where NNF put it
    assert sorted(p.name for p in persistent.iterdir()) == pods
    assert f"wrote {server}" in saved[0]
    assert f"dirs {DIRECTORIES}" in saved[0], saved
    # NNF_CONTAINER_*: the pods that wrote the files, each resolvable by its peers
    assert f"peers {','.join(pods)}" in saved[0], saved
    assert all(saved[0].count(f"resolves {pod}") == len(pods) for pod in pods), saved
    # one pod on each rabbit; each one's tasks see its own rabbit as NNF_NODE_NAME
    # (a Flux job's environment is rank 0's: the job shell's rc sets it), and the
    # ports NNF's port manager gave the Workflow, published on every rabbit
    assert sorted(placed.values()) == sorted(RABBITS), placed
    ports = flow["status"]["env"]["NNF_CONTAINER_PORTS"]  # the played port manager's pair
    assert len(ports.split(",")) == 2, flow["status"]["env"]
    for pod, rabbit in placed.items():
        told = f"on {rabbit} as {pod} ports {ports} mpi {ports}"
        assert saved[0].count(told) == 1, (told, saved)
    assert published == [[int(p) for p in ports.split(",")]] * len(RABBITS), published
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


def run_to_post_run(cluster: LocalCluster, machine: Wlm, name: str, directives: list[str],
                    job: str | dict[str, Any]) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """A job's Workflow to PostRun: its MiniCluster made at PreRun (``job``:
    a jobspec, or the command of one), its end waited for and PostRun's
    hook called (exit code 0 asserted) before PostRun is asked for. Returns
    the Workflow and the log's tail kept."""
    client = fluxhop.Client(namespace=machine.namespace, kubeconfig=cluster.admin_kubeconfig)
    saved: list[str] = []
    jobspec = rabbit_job(job) if isinstance(job, str) else job

    def pre_run(flow: dict[str, Any]) -> None:
        on_pre_run(jobspec, flow, RABBITS, OWNER, client, cxi_resource=None,
                   mount_root=str(machine.nnf.prefix))  # fmt: skip

    def post_run(flow: dict[str, Any]) -> None:
        client.wait(name, timeout=300)
        assert on_post_run(flow, client, saved.append) == 0

    try:
        machine.create(name, directives, uid=OWNER.uid, gid=OWNER.gid)
        flow = machine.run(name, {"PreRun": pre_run}, before={"PostRun": post_run}, until="PostRun")
    finally:
        client.close()
    return flow, saved


def test_without_a_container_directive_each_servers_access_says_where(
    cluster: LocalCluster, machine: Wlm
):
    """No ``#DW container`` directive: a Lustre file system is mounted from
    its ``-servers`` NnfAccess mountPath, and an XFS one (per compute, not
    mountable twice) gets no volume."""
    name = "fluxjob-3"
    command = 'sh -c \'hostname > "$DW_JOB_big/$(hostname)"; echo "local ${DW_JOB_local:-none}"\''
    directives = [
        "#DW jobdw type=lustre capacity=1TiB name=big",
        "#DW jobdw type=xfs capacity=1GiB name=local",
    ]
    flow, saved = run_to_post_run(cluster, machine, name, directives, command)
    server = machine.nnf.server_path(flow, 0)
    assert sorted(p.name for p in server.iterdir()) == [f"{name}-0", f"{name}-1"]
    assert "local none" in saved[0], saved
    machine.finish(name)


# PreRun in a process of its own, as the workload manager's service runs it:
# the test kills it mid-way (a crash) and calls the hook again (the retry)
PRE_RUN = """
import json, sys
import fluxhop
from fluxhop.rabbit.hooks import on_pre_run
from fluxhop.rabbit.policy import Owner
a = json.loads(sys.argv[1])
with fluxhop.Client(namespace=a["namespace"], kubeconfig=a["kubeconfig"]) as client:
    on_pre_run(a["jobspec"], a["flow"], a["rabbits"], Owner(**a["owner"]), client,
               cxi_resource=None, mount_root=a["root"])
"""


def test_a_crash_and_retry_at_each_hook_creates_nothing_twice(cluster: LocalCluster, machine: Wlm,
                                                              admin: Api):  # fmt: skip
    """Setup and Teardown twice; PreRun killed while it waits for the pods
    (the objects made, the pods kept from running by the rabbits cordoned),
    then called again, and again once it returned; PostRun twice. One of
    each object throughout, the CURVE key never replaced, the job's code
    once."""
    name, ns = "fluxjob-crash", machine.namespace
    jobspec = rabbit_job("hostname")
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    saved: list[str] = []
    codes: list[int | None] = []
    first: dict[str, str] = {}
    root = str(machine.nnf.prefix)

    def setup(flow: dict[str, Any]) -> None:
        assert [on_setup(jobspec, flow, RABBITS, OWNER) for _ in range(2)] == [name, name]

    def pre_run(flow: dict[str, Any]) -> None:
        argument = json.dumps({
            "namespace": ns, "kubeconfig": str(cluster.admin_kubeconfig), "jobspec": jobspec,
            "flow": flow, "rabbits": RABBITS, "root": root,
            "owner": {"uid": OWNER.uid, "gid": OWNER.gid, "user": OWNER.user, "groups": []}})  # fmt: skip
        cordon(admin, True)  # its pods cannot be placed: PreRun waits for them until killed
        child = subprocess.Popen([sys.executable, "-c", PRE_RUN, argument])
        try:
            eventually("the crashing PreRun made its Job",
                       lambda: admin.find(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"), 120)  # fmt: skip
        finally:
            child.kill()
            child.wait()
            cordon(admin, False)
        assert child.returncode == -signal.SIGKILL, "PreRun ended before the crash"
        # the kill may land anywhere after the root (the Job): what it had
        # made is kept, what it had not is made by the retry
        first.update(made(admin, ns, name))
        kept: dict[str, str] = {}
        for _ in range(2):  # the retry, then a retry of a PreRun that had finished
            assert on_pre_run(jobspec, flow, RABBITS, OWNER, client, cxi_resource=None,
                              mount_root=root) == name  # fmt: skip
            now = made(admin, ns, name)
            objects = {k: now.get(k) for k in ("Job", "Secret", "Service")}
            assert all(objects.values()), now
            assert {k: v for k, v in objects.items() if k in first} == {
                k: first[k] for k in objects if k in first}  # fmt: skip
            assert not kept or objects == kept, (objects, kept)  # the second retry: the same
            kept = objects
            assert len(now) == 3 + len(RABBITS), now  # one pod per rank, none twice

    def post_run(flow: dict[str, Any]) -> None:
        client.wait(name, timeout=300)
        codes.extend(on_post_run(flow, client, saved.append) for _ in range(2))

    def teardown(flow: dict[str, Any]) -> None:
        assert [on_teardown(flow, client, saved.append) for _ in range(2)] == [False, False]

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"Setup": setup, "PreRun": pre_run, "Teardown": teardown},
                    before={"PostRun": post_run})  # fmt: skip
    finally:
        client.close()
    assert first and codes == [0, None] and len(saved) == 1, (first, codes, saved)
    assert made(admin, ns, name) == {}
    machine.finish(name)


def test_a_minicluster_not_up_within_the_profiles_timeout_is_one_line_and_deleted(
    cluster: LocalCluster, machine: Wlm, admin: Api
):
    """The container profile gives PreRun 5 s; the MiniCluster's pods can
    never be placed (rabbits no node is): one line saying so, and nothing
    left of it."""
    name, ns, profile = "fluxjob-late", machine.namespace, "fluxhop-mpi-5s"
    admin.apply(f"{NNF_API}/namespaces/{PROFILES}/nnfcontainerprofiles/{profile}",
                container_profile(profile, preRunTimeoutSeconds=5), "test")  # fmt: skip
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    seen: list[str] = []

    def pre_run(flow: dict[str, Any]) -> None:
        with pytest.raises(fluxhop.errors.FluxhopError) as caught:
            on_pre_run(rabbit_job("hostname"), flow, ("no-such-rabbit-1", "no-such-rabbit-2"),
                       OWNER, client, cxi_resource=None, mount_root=str(machine.nnf.prefix))  # fmt: skip
        seen.append(str(caught.value))

    container = f"#DW container name=mpi profile={profile} DW_JOB_scratch=scratch"
    try:
        machine.create(name, [SCRATCH, container], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"PreRun": pre_run}, until="PreRun")
    finally:
        client.close()
    assert len(seen) == 1 and "\n" not in seen[0], seen
    assert "timed out after 5s" in seen[0] and "preRunTimeoutSeconds" in seen[0], seen
    assert seen[0].endswith("the MiniCluster is deleted"), seen
    eventually("nothing left of the MiniCluster", lambda: made(admin, ns, name) == {}, 60)
    machine.finish(name)


def test_pre_run_is_over_once_the_instance_is_up(cluster: LocalCluster, machine: Wlm, admin: Api):
    """PreRun returns once rank 0's pod is Ready, which its readinessProbe
    (run by the test kubelet as a kubelet runs it) makes mean its broker is
    in the run state: at that moment Flux itself says the instance runs,
    with every broker online. Teardown then deletes the running MiniCluster."""
    name, ns = "fluxjob-up", machine.namespace
    client = fluxhop.Client(namespace=ns, kubeconfig=cluster.admin_kubeconfig)
    seen: dict[str, Any] = {}

    def pre_run(flow: dict[str, Any]) -> None:
        on_pre_run(rabbit_job("sleep 600"), flow, RABBITS, OWNER, client, cxi_resource=None,
                   mount_root=str(machine.nnf.prefix))  # fmt: skip
        pods = admin.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={name}")
        lead = next(p for p in pods["items"] if p["metadata"]["name"].startswith(f"{name}-0-"))
        seen["ready"] = {c["type"]: c["status"] for c in lead["status"]["conditions"]}["Ready"]
        uptime = ". /mnt/flux/run/env.sh && $flux_bin uptime"
        seen["uptime"] = kubectl(cluster, "exec", "-n", ns, lead["metadata"]["name"], "-c", name,
                                 "--", "bash", "-c", uptime).stdout  # fmt: skip

    def teardown(flow: dict[str, Any]) -> None:
        seen["teardown"] = on_teardown(flow, client, lambda text: None)

    try:
        machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
        machine.run(name, {"PreRun": pre_run, "Teardown": teardown})
    finally:
        client.close()
    assert seen["ready"] == "True", seen
    _, state, *rest = seen["uptime"].split()
    assert state == "run" and "size 2" in " ".join(rest) and "offline" not in seen["uptime"], seen
    assert seen["teardown"] is True  # a MiniCluster was still there to delete
    eventually("nothing left of the MiniCluster", lambda: made(admin, ns, name) == {}, 60)
    machine.finish(name)


@pytest.fixture
def global_lustre(cluster: LocalCluster, machine: Wlm, admin: Api) -> Iterator[Path]:
    """A global Lustre file system as NNF's Lustre operator presents it to
    the Workflow's namespace: a LustreFileSystem (``home``, in NNF's
    namespace) whose mountRoot is a host directory standing in for the
    Lustre mount, and the claim the operator makes for that namespace,
    ``home-nnf-system-readwritemany-pvc``, bound to a volume at that root."""
    root, ns = RUN_DIR / "lustre", machine.namespace
    root.mkdir(parents=True, exist_ok=True)
    crd = lustre_crd()
    pv = f"lustre-home-{ns}"
    admin.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}",
                crd, "test")  # fmt: skip
    eventually("the LustreFileSystem CRD established", lambda: established(admin, crd))
    admin.create(f"{LUS_API}/namespaces/{PROFILES}/lustrefilesystems", {
        "apiVersion": "lus.cray.hpe.com/v1beta1", "kind": "LustreFileSystem",
        "metadata": {"name": "home"},
        "spec": {"name": "home", "mgsNids": "10.0.0.1@tcp", "mountRoot": str(root),
                 "namespaces": {ns: {"modes": ["ReadWriteMany"]}}}})  # fmt: skip
    claim = "home-nnf-system-readwritemany-pvc"
    admin.create("/api/v1/persistentvolumes", {
        "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                 "storageClassName": "", "hostPath": {"path": str(root), "type": "Directory"},
                 "claimRef": {"namespace": ns, "name": claim}}})  # fmt: skip
    admin.create(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
        "metadata": {"name": claim},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                 "resources": {"requests": {"storage": "1Gi"}}}})  # fmt: skip
    eventually("the claim bound (the PV controller)",
               lambda: admin.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
               ["status"].get("phase") == "Bound", 60)  # fmt: skip
    try:
        yield root
    finally:
        admin.delete(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
        admin.delete(f"/api/v1/persistentvolumes/{pv}")
        admin.delete(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        )
        eventually("the claim's volume gone",
                   lambda: admin.find(f"/api/v1/persistentvolumes/{pv}") is None, 60)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def test_a_global_lustre_is_mounted_through_its_claim_at_its_root(
    cluster: LocalCluster, machine: Wlm, global_lustre: Path
):
    """``DW_GLOBAL_home=<root>/alice`` on the container directive: NNF lists
    no volume for it; fluxhop finds the LustreFileSystem holding the path
    and mounts its claim at the mount root, announced as NNF announces it.
    What each task writes there lands in the Lustre stand-in."""
    name = "fluxjob-global"
    command = ('sh -c \'mkdir -p "$DW_GLOBAL_home/alice"; '
               'hostname > "$DW_GLOBAL_home/alice/$(hostname)"; echo "global $DW_GLOBAL_home"\'')  # fmt: skip
    container = f"{CONTAINER} DW_GLOBAL_home={global_lustre}/alice"
    _, saved = run_to_post_run(cluster, machine, name, [SCRATCH, container], command)
    assert sorted(p.name for p in (global_lustre / "alice").iterdir()) == [f"{name}-0", f"{name}-1"]
    assert f"global {global_lustre}" in saved[0], saved
    machine.finish(name)


def test_hop_with_the_workflow_mounts_what_pre_run_would(cluster: LocalCluster, machine: Wlm):
    """``fluxhop hop --workflow NAME`` on a Workflow at PreRun reads the same
    objects the hook reads: the à-la-carte MiniCluster mounts the GFS2 file
    system where NNF listed it, with its directory map."""
    name, ns = "fluxjob-hop", machine.namespace
    machine.create(name, [SCRATCH, CONTAINER], uid=OWNER.uid, gid=OWNER.gid)
    flow = machine.run(name, until="PreRun")
    argv = [str(FLUXHOP), "hop", "--workflow", name, "--namespace", ns, "--rabbits", ",".join(RABBITS),
            "--nnf-mount-root", str(machine.nnf.prefix), "--name", "by-hand", "--dry-run",
            "--output", "json"]  # fmt: skip
    done = subprocess.run(
        argv, env=command_env(cluster), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    objects = json.loads(done.stdout)["items"]  # a List, as kubectl prints one
    job = next(o for o in objects if o["kind"] == "Job")
    template = job["spec"]["template"]["spec"]
    path = str(machine.nnf.server_path(flow, 0))
    assert {"name": "rabbit-0", "hostPath": {"path": path, "type": "Directory"}} in template[
        "volumes"
    ]
    env = {e["name"]: e.get("value") for e in template["containers"][0]["env"]}
    assert env["DW_JOB_scratch"] == path
    assert env["DW_JOB_scratch_DIRECTORIES"] == DIRECTORIES
    machine.finish(name)


def test_the_rabbit_jobspec_example_runs_lammps_on_the_rabbits(cluster: LocalCluster, machine: Wlm):
    """examples/rabbit-mpi-jobspec.yaml as a site's DWS hooks take it: its
    ``#DW`` directive on the job's Workflow, its ``rabbit.mpi.*`` the
    MiniCluster made at PreRun: metric-lammps and the Flux view pulled by
    the rabbits, LAMMPS on 2 of them. Changed only for this machine: the
    Lennard-Jones melt input, as in the LAMMPS example (Debian builds LAMMPS
    without the REAXFF its HNS input needs), and a rank per core (Flux finds
    2 on each rabbit here, and refuses 8 ranks on 4 cores as unsatisfiable)."""
    name = "fluxjob-lammps"
    (jobspec,) = read(next(p for p in EXAMPLES if p.name == "rabbit-mpi-jobspec.yaml")).documents
    mpi = jobspec["attributes"]["system"]["rabbit"]["mpi"]
    assert (mpi["workdir"], mpi["nodes"], mpi["tasks"]) == (
        "/opt/lammps/examples/reaxff/HNS",
        len(RABBITS),
        8,
    ), mpi
    mpi["workdir"] = "/opt/lammps/examples/melt"
    mpi["command"] = mpi["command"].replace("-in in.reaxc.hns", "-in in.melt")
    mpi["tasks"] = 2 * len(RABBITS)
    directive = jobspec["attributes"]["system"]["dw"]
    _, saved = run_to_post_run(cluster, machine, name, [directive], jobspec)
    lines = saved[0].splitlines()
    assert any(line.startswith("Loop time of ") and "on 4 procs" in line for line in lines), saved
    machine.finish(name)
