"""A rabbit request as a MiniCluster, rendered for both targets and checked
against the real schemas (Kubernetes OpenAPI and the MiniCluster CRD)."""

from __future__ import annotations

import pytest

from fluxhop.rabbit import RabbitError, RabbitRequest, Workflow
from fluxhop.rabbit.storage import RabbitVolume
from fluxhop.render import render
from fluxhop.render.bundle import node_local_names
from tests.rabbit.conftest import RABBITS, WORKFLOW_UID, rabbit_job, workflow_object
from tests.schemas import validate

UID, GID = 1001, 2001  # deliberately different: the prototype reused the uid as gid


def build(mpi=None, rabbits=RABBITS, **kwargs):
    request = RabbitRequest.from_jobspec(rabbit_job({} if mpi is None else mpi))
    kwargs.setdefault("name", "fluxjob-1234")
    kwargs.setdefault("uid", UID)
    kwargs.setdefault("gid", GID)
    return request.to_minicluster(rabbits, **kwargs)


def pod_spec(objects):
    job = next(o for o in objects if o["kind"] == "Job")
    return job, job["spec"]["template"]["spec"]


@pytest.mark.parametrize("target", ["job", "minicluster", "jobset"])
def test_every_target_passes_the_real_schemas(target, workflow):
    spec = build(
        {"image": "lammps:cxi", "command": "lmp -in in.reaxc", "succeed": True, "exclusive": True},
        workflow=workflow,
    )
    objects = render(spec, target)
    for obj in objects:
        validate(obj)


def test_placement_and_scheduling_fields_are_at_the_right_level():
    spec = build({"nodes": 2})
    cr = render(spec, "minicluster")[-1]
    pod = cr["spec"]["pod"]
    assert pod["nodeSelector"] == {"cray.nnf.node": "true"}  # not spec.pod.pod (upstream defect)
    assert "pod" not in pod
    assert pod["nodeAffinity"] == {"kubernetes.io/hostname": ["rabbit-p1", "rabbit-p2"]}
    assert pod["tolerations"] == [
        {"key": "cray.nnf.node", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert (cr["spec"]["size"], cr["spec"]["maxSize"], cr["spec"]["tasks"]) == (2, 2, 2)

    job, template = pod_spec(render(spec, "job"))
    assert job["spec"]["parallelism"] == 2
    assert template["nodeSelector"] == {"cray.nnf.node": "true"}
    assert template["tolerations"][0]["key"] == "cray.nnf.node"
    terms = template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/hostname",
                    "operator": "In",
                    "values": ["rabbit-p1", "rabbit-p2"],
                }
            ]
        }
    ]


@pytest.mark.parametrize(("nodes", "size"), [(None, 4), (2, 2), (10, 4)])
def test_size_follows_nodes_capped_by_rabbits(nodes, size, recwarn):
    spec = build({} if nodes is None else {"nodes": nodes})
    assert spec.spec.size == spec.spec.max_size == size
    assert spec.spec.tasks == size  # not 0 (upstream defect: 0 overrode the operator default)


def test_tasks_are_passed_through():
    assert build({"tasks": 96, "nodes": 2}).spec.tasks == 96


@pytest.mark.parametrize("rabbits", [["rabbit-p2", "rabbit-p4"], "rabbit-p4,rabbit-p2"])
def test_rabbits_filter_as_list_or_string(rabbits):
    spec = build({"rabbits": rabbits})
    assert spec.spec.pod.node_affinity["kubernetes.io/hostname"] == ["rabbit-p2", "rabbit-p4"]


def test_no_rabbit_left_is_an_error_not_an_empty_minicluster():
    with pytest.raises(RabbitError, match="names none of this job's rabbits"):
        build({"rabbits": "r9"})
    with pytest.raises(RabbitError, match="no rabbits are available"):
        build({}, rabbits=[])


def test_security_context_uses_the_owners_uid_and_gid():
    spec = build({"image": "lammps:cxi"})
    template = pod_spec(render(spec, "job"))[1]
    assert template["securityContext"] == {
        "runAsUser": UID,
        "runAsGroup": GID,
        "runAsNonRoot": True,
        "fsGroup": GID,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    app = template["containers"][0]
    assert app["securityContext"] == {
        "runAsUser": UID,
        "runAsGroup": GID,
        "runAsNonRoot": True,
        "privileged": False,
        "capabilities": {
            "add": ["NET_BIND_SERVICE", "SYS_CHROOT", "AUDIT_WRITE", "SETUID", "SETGID"],
            "drop": ["ALL"],
        },
    }
    assert "initContainers" not in template  # the view mounted from its image: no copy
    copied = spec.model_copy(deep=True)
    copied.spec.flux.container.volume = "copy"
    view = pod_spec(render(copied, "job"))[1]["initContainers"][0]
    assert view["securityContext"] == {"runAsUser": UID, "runAsGroup": GID, "runAsNonRoot": True}


def test_root_owner_is_not_marked_non_root():
    spec = build({}, uid=0, gid=0)
    assert spec.spec.pod.security_context.run_as_non_root is None


def test_bad_owner_ids_are_refused():
    with pytest.raises(RabbitError, match="uid must be a number"):
        build({}, uid=-1)


@pytest.mark.parametrize("uid", ["1001", True])
def test_owner_ids_of_the_wrong_type_are_refused(uid):
    with pytest.raises(TypeError, match=r"^RabbitRequest.to_minicluster: uid must be int, not"):
        build({}, uid=uid)


@pytest.mark.parametrize("resource", [None, "example.com/nic"])
def test_cxi_nic_is_requested(resource):
    kwargs = {} if resource is None else {"cxi_resource": resource}
    app = pod_spec(render(build({}, **kwargs), "job"))[1]["containers"][0]
    name = resource or "beta.hpe.com/cxi"
    assert app["resources"] == {"limits": {name: "1"}, "requests": {name: "1"}}


@pytest.mark.parametrize(
    ("mpi", "view"),
    [
        ({}, False),  # the default image carries Flux
        ({"image": "lammps:cxi"}, True),
        ({"image": "lammps:cxi", "add_flux": False}, False),  # upstream defect: view was added
        ({"image": "lammps:cxi", "add_flux": "no"}, False),
    ],
)
def test_flux_view(mpi, view):
    spec = build(mpi)
    assert spec.spec.flux.container.disable is (not view)
    template = pod_spec(render(spec, "job"))[1]
    assert any("image" in volume for volume in template["volumes"]) is view  # mounted
    cr = render(spec, "minicluster")[-1]
    assert cr["spec"]["flux"]["container"].get("disable", False) is (not view)


def test_command_and_interactive():
    spec = build({"command": "lmp -in in.reaxc"})
    assert spec.spec.flux_container.command == ["lmp", "-in", "in.reaxc"]
    assert not spec.spec.interactive
    cr = render(spec, "minicluster")[-1]
    assert cr["spec"]["containers"][0]["command"] == "lmp -in in.reaxc"
    assert build({}).spec.interactive


def test_succeed_exclusive_pull_and_env():
    spec = build(
        {
            "succeed": True,
            "exclusive": True,
            "pull_policy": "Always",
            "pull_secret": "regcred",
            "env": {"one": "ketchup", "two": "mustard"},
            "workdir": "/work",
        }
    )
    cr = render(spec, "minicluster")[-1]
    assert cr["spec"]["jobLabels"] == {"always-succeed": "1"}
    assert cr["spec"]["flux"]["optionFlags"] == "--exclusive"
    container = cr["spec"]["containers"][0]
    assert (container["imagePullPolicy"], container["imagePullSecret"]) == ("Always", "regcred")
    assert container["environment"] == {"one": "ketchup", "two": "mustard"}
    assert container["workingDir"] == "/work"
    job, template = pod_spec(render(spec, "job"))
    assert job["metadata"]["labels"]["always-succeed"] == "1"
    assert template["imagePullSecrets"] == [{"name": "regcred"}]
    assert build({"succeed": "no"}).spec.job_labels == {}  # upstream defect: "no" meant yes


def test_host_directories_for_the_fabric():
    spec = build({})
    volumes = spec.spec.flux_container.volumes
    assert {n: (v.host_path, v.path) for n, v in volumes.items()} == {
        "devices": ("/sys/devices", "/sys/devices"),
        "net": ("/sys/class/net", "/sys/class/net"),
    }


def nnf_says(workflow):
    """Where NNF mounted the fixture Workflow's mountable file systems (its
    NnfAccess mountPaths): not composed by fluxhop, so any prefix will do."""
    flow = Workflow.from_object(workflow)
    return [
        RabbitVolume(fs.name, fs.command, fs.index, f"/nnf-prefix/{WORKFLOW_UID}-{fs.index}")
        for fs in flow.file_systems()
    ]


def test_every_mountable_file_system_is_mounted_where_nnf_mounted_it(workflow):
    spec = build(workflow=workflow, storage=nnf_says(workflow))
    volumes = spec.spec.flux_container.volumes
    rabbit = {n: (v.host_path, v.path) for n, v in volumes.items() if n.startswith("rabbit-")}
    at = {i: f"/nnf-prefix/{WORKFLOW_UID}-{i}" for i in (1, 3, 4)}
    # index 0 is XFS (not mountable twice) and index 2 is a copy_in
    assert rabbit == {f"rabbit-{i}": (path, path) for i, path in at.items()}
    env = spec.spec.flux_container.environment
    assert env["DW_JOB_shared_scratch"] == at[1]
    assert env["DW_JOB_big"] == at[3]
    assert env["DW_PERSISTENT_project_data"] == at[4]
    assert (env["DW_WORKFLOW_NAME"], env["DW_WORKFLOW_NAMESPACE"]) == ("fluxjob-1234", "default")
    template = pod_spec(render(spec, "job"))[1]
    host_paths = {v["name"]: v["hostPath"] for v in template["volumes"] if "hostPath" in v}
    assert host_paths["rabbit-3"] == {"path": at[3], "type": "Directory"}


def test_rabbit_mount_puts_them_in_a_directory_each(workflow):
    spec = build({"rabbit_mount": "/mnt/wabbit"}, workflow=workflow, storage=nnf_says(workflow))
    volumes = spec.spec.flux_container.volumes
    assert volumes["rabbit-1"].host_path == f"/nnf-prefix/{WORKFLOW_UID}-1"
    assert volumes["rabbit-1"].path == "/mnt/wabbit/shared-scratch"
    assert spec.spec.flux_container.environment["DW_JOB_big"] == "/mnt/wabbit/big"


def test_a_single_file_system_is_mounted_at_rabbit_mount_itself():
    flow = workflow_object("#DW jobdw type=gfs2 capacity=10GiB name=scratch")
    spec = build({"rabbit_mount": "/mnt/nnf/rabbit"}, workflow=flow, storage=nnf_says(flow))
    volume = spec.spec.flux_container.volumes["rabbit-0"]
    assert (volume.host_path, volume.path) == (f"/nnf-prefix/{WORKFLOW_UID}-0", "/mnt/nnf/rabbit")
    assert spec.spec.flux_container.environment["DW_JOB_scratch"] == "/mnt/nnf/rabbit"


def test_workflow_defaults_do_not_leak_into_the_next_job(workflow):
    request = RabbitRequest.from_jobspec(rabbit_job({"env": {"A": "1"}}))
    with_flow = request.to_minicluster(RABBITS, name="a", uid=UID, gid=GID, workflow=workflow,
                                       storage=nnf_says(workflow))  # fmt: skip
    without = request.to_minicluster(RABBITS, name="b", uid=UID, gid=GID)
    assert any(n.startswith("rabbit-") for n in with_flow.spec.flux_container.volumes)
    assert set(without.spec.flux_container.volumes) == {"devices", "net"}
    assert without.spec.flux_container.environment == {"A": "1"}
    other = RabbitRequest.from_jobspec(rabbit_job({})).to_minicluster(
        RABBITS, name="c", uid=UID, gid=GID
    )
    assert other.spec.flux_container.environment == {}


def test_user_env_cannot_shadow_workflow_variables(workflow):
    with pytest.raises(RabbitError, match=r"rabbit\.mpi\.env\.DW_JOB_big is set by the workflow"):
        build({"env": {"DW_JOB_big": "/elsewhere"}}, workflow=workflow, storage=nnf_says(workflow))


def test_workflow_object_is_checked():
    with pytest.raises(RabbitError, match=r"metadata\.uid"):
        Workflow.from_object({"metadata": {"name": "x"}})
    with pytest.raises(RabbitError, match="dwDirectives"):
        Workflow.from_object({"metadata": {"name": "x", "uid": "u"}, "spec": {"dwDirectives": "x"}})


def test_not_requested_is_an_error():
    with pytest.raises(RabbitError, match="does not ask for a rabbit MiniCluster"):
        RabbitRequest().to_minicluster(RABBITS, name="x", uid=UID, gid=GID)


def test_same_request_same_bytes():
    from fluxhop.flux.curve import CurveCert

    cert = CurveCert.generate("fluxjob-1234")
    first = render(build({"nodes": 3}), "job", cert=cert)
    again = render(build({"nodes": 3}), "job", cert=cert)
    assert first == again


def test_no_cxi_resource_requests_no_nic():
    spec = build(cxi_resource=None)
    assert spec.spec.flux_container.resources.limits == {}
    container = pod_spec(render(spec, "job"))[1]["containers"][0]
    assert not container.get("resources", {}).get("limits"), container
    assert build().spec.flux_container.resources.limits == {"beta.hpe.com/cxi": 1}


def test_each_computes_gfs2_directory_is_told_to_the_pods():
    flow = workflow_object("#DW jobdw type=gfs2 capacity=10GiB name=scratch")
    volume = RabbitVolume(
        "scratch", "jobdw", 0, "/mnt/nnf/u-0", (("c1", "rabbit-a-0"), ("c2", "rabbit-b-0"))
    )
    env = build(workflow=flow, storage=[volume]).spec.flux_container.environment
    assert env["DW_JOB_scratch_DIRECTORIES"] == "c1=rabbit-a-0 c2=rabbit-b-0"


def rendered_peers(objects):
    """Each pod's DNS name as the rendered objects make it (Indexed Job or
    JobSet: ``hostname`` is the host prefix plus the completion index),
    from the pod template, the way the cluster will name the pods."""
    workload = next(o for o in objects if o["kind"] in ("Job", "JobSet"))
    if workload["kind"] == "JobSet":
        (replicated,) = workload["spec"]["replicatedJobs"]
        job = replicated["template"]
        prefix = f"{workload['metadata']['name']}-{replicated['name']}-0-"
    else:
        job = workload
        prefix = f"{workload['metadata']['name']}-"
    template = job["spec"]["template"]["spec"]
    size = job["spec"]["completions"]
    # a JobSet's pods get the subdomain its controller sets from spec.network
    subdomain = template.get("subdomain") or workload["spec"]["network"]["subdomain"]
    return subdomain, [f"{prefix}{rank}" for rank in range(size)], template


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_pods_are_told_their_peers_as_nnf_tells_its_containers(target, workflow):
    spec = build({"nodes": 3}, workflow=workflow, target=target, cluster_domain="hpc.example")
    subdomain, hosts, template = rendered_peers(render(spec, target, cluster_domain="hpc.example"))
    env = {e["name"]: e.get("value") for e in template["containers"][0]["env"]}
    assert env["NNF_CONTAINER_SUBDOMAIN"] == subdomain == "fluxjob-1234"
    assert env["NNF_CONTAINER_DOMAIN"] == "default.svc.hpc.example"
    assert env["NNF_CONTAINER_HOSTNAMES"].split(",") == hosts and len(hosts) == 3  # NNF's commas


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_each_pod_is_told_its_rabbit_and_the_workflows_ports(target, workflow):
    # NNF_NODE_NAME from the downward API (spec.nodeName, through the Flux
    # container's FLUXHOP_NODE_NAME, defined before it); the ports NNF's port
    # manager gave the Workflow, from its status.env, as NNF's containers get them
    workflow["status"] = {"env": {"NNF_CONTAINER_PORTS": "30000,30001",
                                  "NNF_CONTAINER_PORTS_mpi": "30000,30001",
                                  "NNF_CONTAINER_SUBDOMAIN": "not-ours"}}  # fmt: skip
    spec = build(workflow=workflow, target=target)
    _, _, template = rendered_peers(render(spec, target))
    env = template["containers"][0]["env"]
    names = [e["name"] for e in env]
    values = {e["name"]: e.get("value") for e in env}
    assert env[names.index("FLUXHOP_NODE_NAME")]["valueFrom"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
    }
    assert names.index("FLUXHOP_NODE_NAME") < names.index("NNF_NODE_NAME")  # $() sees it
    assert values["NNF_NODE_NAME"] == "$(FLUXHOP_NODE_NAME)"
    assert values["NNF_CONTAINER_PORTS"] == values["NNF_CONTAINER_PORTS_mpi"] == "30000,30001"
    assert values["NNF_CONTAINER_SUBDOMAIN"] == "fluxjob-1234"  # the MiniCluster's, not NNF's pods'
    # published on each rabbit, as NNF publishes them on its launcher's node
    ports = {p["containerPort"]: p for p in template["containers"][0]["ports"]}
    assert ports[30000]["hostPort"] == 30000 and ports[30001]["hostPort"] == 30001
    assert "hostPort" not in ports[8050]  # the brokers' own port stays in the pod
    # and each pod's tasks get their own node's NNF_NODE_NAME (node-env.lua)
    assert "NNF_NODE_NAME" in node_local_names(spec)


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_one_pod_per_rabbit_is_required_not_preferred(target):
    # two brokers on one rabbit would leave another without its MiniCluster pod
    _, _, template = rendered_peers(render(build({"nodes": 2}, target=target), target))
    (term,) = template["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"fluxhop.io/minicluster": "fluxjob-1234"}


def test_the_flux_operators_pods_get_no_node_name_they_cannot_fill(workflow):
    workflow["status"] = {"env": {"NNF_CONTAINER_PORTS": "30000"}}
    lead = build(workflow=workflow, target="minicluster").spec.flux_container
    assert "NNF_NODE_NAME" not in lead.environment and "NNF_CONTAINER_SUBDOMAIN" in lead.environment
    assert lead.host_ports == []  # the Flux Operator's CRD has no place for them


@pytest.mark.parametrize("listed", ["30000,x", "30000,70000", "-1"])
def test_a_workflow_port_that_is_not_a_port_is_one_line(workflow, listed):
    workflow["status"] = {"env": {"NNF_CONTAINER_PORTS_mpi": listed}}
    with pytest.raises(
        RabbitError,
        match=r"^Workflow fluxjob-1234 status.env.NNF_CONTAINER_PORTS_mpi must list port numbers \(1-65535\) with commas, not ",
    ):
        build(workflow=workflow)


def test_a_workflow_port_that_is_not_a_string_is_one_line(workflow):
    workflow["status"] = {"env": {"NNF_CONTAINER_PORTS": [30000]}}
    with pytest.raises(
        RabbitError, match=r"^Workflow fluxjob-1234 status.env.NNF_CONTAINER_PORTS must be a string"
    ):
        build(workflow=workflow)


def test_no_workflow_no_nnf_variables():
    env = build().spec.flux_container.environment
    assert not [k for k in env if k.startswith(("NNF_", "DW_"))], env


def test_a_global_lustre_is_mounted_through_its_claim_where_nnf_mounts_it(workflow):
    flow = workflow_object("#DW jobdw type=gfs2 capacity=10GiB name=scratch",
                           "#DW container name=mpi profile=p DW_JOB_scratch=scratch "
                           "DW_GLOBAL_home=/lus/home/alice DW_GLOBAL_mine=/lus/home/bob")  # fmt: skip
    claim = "home-nnf-system-readwritemany-pvc"
    storage = [
        RabbitVolume("scratch", "jobdw", 0, "/mnt/nnf/u-0"),
        RabbitVolume("home", "globaldw", 1, "/lus/home", claim=claim),
        RabbitVolume("mine", "globaldw", 1, "/lus/home", claim=claim),  # the same Lustre
    ]
    spec = build({"rabbit_mount": "/mnt/rabbit"}, workflow=flow, storage=storage)
    env = spec.spec.flux_container.environment
    assert (env["DW_JOB_scratch"], env["DW_GLOBAL_home"]) == ("/mnt/rabbit", "/lus/home")
    assert env["DW_GLOBAL_mine"] == "/lus/home"
    objects = render(spec, "job")
    for obj in objects:
        validate(obj)
    template = pod_spec(objects)[1]
    claims = {v["name"]: v["persistentVolumeClaim"] for v in template["volumes"]
              if "persistentVolumeClaim" in v}  # fmt: skip
    assert [c["claimName"] for c in claims.values()] == ["home-nnf-system-readwritemany-pvc"]
    mounts = {m["name"]: m["mountPath"] for m in template["containers"][0]["volumeMounts"]}
    assert mounts[next(iter(claims))] == "/lus/home"
