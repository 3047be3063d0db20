"""Rendered objects: admissible to a real API server, deterministic, and
carrying the Flux bootstrap the brokers need."""

from __future__ import annotations

import base64
import copy
import json
import shlex
import tomllib
import warnings

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.flux import hostlist
from fluxhop.flux.curve import CurveCert
from fluxhop.flux.resources import ResourceSet
from fluxhop.render import TARGETS, render
from fluxhop.render.output import dump_json, dump_yaml
from fluxhop.spec import MiniCluster
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.minicluster import ResourceRequirements, SecurityContext
from tests.conformance import CONFORMANCE
from tests.documents import minicluster_doc
from tests.render.entrypoint import run_flags
from tests.schemas import SchemaError, validate

EXAMPLES = sorted((CONFORMANCE / "operator-examples").glob("*.yaml"))
CERT = CurveCert.generate("fixed")


def spec_of(**spec) -> MiniCluster:
    body = {"containers": [{"image": "ubuntu:noble", "command": "hostname"}], **spec}
    return MiniCluster.from_dict(minicluster_doc("demo", "team", **body))


def by_kind(objects):
    return {obj["kind"]: obj for obj in objects}


def pod_spec(objects):
    kinds = by_kind(objects)
    if "Job" in kinds:
        return kinds["Job"]["spec"]["template"]["spec"]
    return kinds["JobSet"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def lead_container(objects):
    return pod_spec(objects)["containers"][0]


def entrypoint_of(spec: MiniCluster) -> str:
    return by_kind(render(spec, cert=CERT))["ConfigMap"]["data"]["entrypoint.sh"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_renders_objects_the_api_server_accepts(path, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        spec = MiniCluster.from_yaml(path.read_text())
        objects = render(spec, target, cert=CERT)
    assert objects
    for obj in objects:
        validate(obj)


def test_the_validator_can_fail():
    job = by_kind(render(spec_of(), cert=CERT))["Job"]
    broken = copy.deepcopy(job)
    broken["spec"]["parallelizm"] = 3
    with pytest.raises(SchemaError, match="parallelizm"):
        validate(broken)
    minicluster = render(spec_of(), "minicluster")[0]
    minicluster["spec"]["containers"][0]["imag"] = "x"
    with pytest.raises(SchemaError):
        validate(minicluster)
    bad_name = copy.deepcopy(job)
    bad_name["metadata"]["name"] = "Bad_Name"
    with pytest.raises(SchemaError):
        validate(bad_name)


@pytest.mark.parametrize("target", ["job", "jobset", "minicluster"])
def test_same_spec_and_cert_give_the_same_bytes(target):
    path = CONFORMANCE / "operator-examples" / "tests__lammps__minicluster.yaml"
    first = dump_yaml(render(MiniCluster.from_yaml(path.read_text()), target, cert=CERT))
    second = dump_yaml(render(MiniCluster.from_yaml(path.read_text()), target, cert=CERT))
    assert first == second
    assert dump_json(
        render(MiniCluster.from_yaml(path.read_text()), target, cert=CERT)
    ) == dump_json(render(MiniCluster.from_yaml(path.read_text()), target, cert=CERT))


def test_a_fresh_cert_changes_only_the_secret():
    spec = spec_of()
    one, two = render(spec), render(spec)
    for a, b in zip(one, two, strict=True):
        if a["kind"] == "Secret":
            assert a != b
        else:
            assert a == b


def test_a_backoff_limit_given_is_the_jobs_and_each_indexs():
    """spec.backoffLimit N: the Job fails after N counted failures, as before
    (the global limit binds first); per index, the same N only moves the
    wait before a pod is made again to that index's own losses."""
    rendered = by_kind(render(spec_of(size=3, backoffLimit=3), cert=CERT))["Job"]
    validate(rendered)
    job = rendered["spec"]
    assert (job["backoffLimit"], job["backoffLimitPerIndex"]) == (3, 3)
    assert "maxFailedIndexes" not in job


def test_job_target_objects():
    objects = render(spec_of(size=4, maxSize=6), cert=CERT)
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ConfigMap", "Secret", "Service", "NetworkPolicy", "Job"]
    job = by_kind(objects)["Job"]["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["parallelism"] == job["completions"] == 4
    assert job["backoffLimit"] == 0
    # the Job controller's wait before making a pod again counts each index's
    # own losses, not every pod the Job lost (bench/bench_lead_state.py --workers-lost)
    assert job["backoffLimitPerIndex"] == 0
    assert job["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert job["template"]["spec"]["subdomain"] == "demo"
    assert "setHostnameAsFQDN" not in job["template"]["spec"]
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "fluxhop"
        assert labels["fluxhop.io/minicluster"] == "demo"
        assert obj["metadata"]["namespace"] == "team"


def test_headless_service_selects_the_pods_and_publishes_early():
    objects = render(spec_of(network={"headlessName": "brokers"}), cert=CERT)
    service = by_kind(objects)["Service"]
    assert service["metadata"]["name"] == "brokers"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    pod_labels = by_kind(objects)["Job"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert pod_spec(objects)["subdomain"] == "brokers"


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_the_flux_container_is_ready_by_its_probe_script(target):
    # rank 0 Ready means its instance is up (ready.sh, run against real Flux
    # in tests/local/test_real_flux.py): the probe runs the mounted script
    objects = render(spec_of(), target, cert=CERT)
    probe = lead_container(objects)["readinessProbe"]
    shell, script = probe["exec"]["command"]
    assert shell == "/bin/bash" and script.startswith("/etc/fluxhop/config/")
    volume = next(v for v in pod_spec(objects)["volumes"] if v["name"] == "fluxhop-config")
    mounted = {item["path"]: item["key"] for item in volume["configMap"]["items"]}
    key = mounted[script.removeprefix("/etc/fluxhop/config/")]
    assert 'flux_bin" uptime' in by_kind(objects)["ConfigMap"]["data"][key]


def broker_toml(objects):
    return tomllib.loads(by_kind(objects)["ConfigMap"]["data"]["broker.toml"])


def test_broker_hosts_are_the_pod_host_names_in_rank_order():
    objects = render(spec_of(size=3, maxSize=5), cert=CERT, cluster_domain="example.org")
    config = broker_toml(objects)["bootstrap"]
    hosts = [h for entry in config["hosts"] for h in hostlist.decode(entry["host"])]
    assert hosts == [f"demo-{i}" for i in range(5)]  # maxSize hosts, from the start
    assert config["default_connect"] == "tcp://%h.demo.team.svc.example.org:%p"
    assert config["curve_cert"] == "/mnt/flux/run/curve.cert"
    assert "archive" not in broker_toml(objects)
    entrypoint = by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]
    assert "-Sbroker.quorum=3" in entrypoint  # start with 3 of 5 ranks


def test_jobset_target_names_hosts_after_the_replicated_job():
    objects = render(spec_of(size=2), "jobset", cert=CERT)
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "ConfigMap",
        "Secret",
        "NetworkPolicy",
        "JobSet",
    ]  # JobSet runs its own Service
    jobset = by_kind(objects)["JobSet"]["spec"]
    assert jobset["network"] == {
        "enableDNSHostnames": True,
        "subdomain": "demo",
        "publishNotReadyAddresses": True,
    }
    hosts = hostlist.decode(broker_toml(objects)["bootstrap"]["hosts"][0]["host"])
    assert hosts == ["demo-node-0-0", "demo-node-0-1"]
    inner = jobset["replicatedJobs"][0]["template"]["spec"]
    assert inner["parallelism"] == inner["completions"] == 2


def test_curve_key_lives_only_in_the_secret_mounted_0400():
    objects = render(spec_of(), cert=CERT)
    secret = by_kind(objects)["Secret"]
    text = base64.b64decode(secret["data"]["curve.cert"]).decode()
    assert CurveCert.from_zpl(text) == CERT
    everything_else = json.dumps([o for o in objects if o["kind"] != "Secret"])
    assert CERT.secret_key not in everything_else
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    assert volumes["fluxhop-curve"]["secret"]["defaultMode"] == 0o400


def test_network_policy_keeps_the_broker_port_to_members():
    policy = by_kind(render(spec_of(), cert=CERT))["NetworkPolicy"]["spec"]
    assert policy["podSelector"] == {"matchLabels": {"fluxhop.io/minicluster": "demo"}}
    members, anyone = policy["ingress"]
    assert members == {
        "from": [{"podSelector": {"matchLabels": {"fluxhop.io/minicluster": "demo"}}}]
    }
    assert "from" not in anyone
    for rule in anyone["ports"]:
        if rule["protocol"] == "TCP":
            assert not rule["port"] <= 8050 <= rule["endPort"]


def resources_of(objects):
    data = by_kind(objects)["ConfigMap"]["data"]
    return ResourceSet.from_json(data["R"]) if "R" in data else None


@pytest.mark.parametrize(
    "resources, cores, gpus",
    [
        ({"requests": {"cpu": "4"}}, 4, 0),
        ({"limits": {"cpu": "8"}, "requests": {"cpu": "6"}}, 6, 0),
        ({"requests": {"cpu": "500m"}}, 1, 0),
        ({"requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": 2}}, 2, 2),
        ({"requests": {"cpu": "2"}, "limits": {"amd.com/gpu": "1"}}, 2, 1),
    ],
)
def test_r_comes_from_declared_resources(resources, cores, gpus):
    spec = spec_of(size=2)
    spec.spec.containers[0].resources = ResourceRequirements.model_validate(resources)
    objects = render(spec, cert=CERT)
    r = resources_of(objects)
    assert r is not None
    assert (r.nnodes, r.ncores, r.ngpus) == (2, 2 * cores, 2 * gpus)
    assert r.nodelist == ["demo-0", "demo-1"]
    # CPUs Kubernetes reserved on the node: Flux checks them (its default)
    assert broker_toml(objects)["resource"] == {"path": "/etc/fluxhop/config/R"}


def test_without_a_cpu_count_cores_are_detected_in_the_pod():
    objects = render(spec_of(), cert=CERT)
    assert resources_of(objects) is None
    assert broker_toml(objects)["resource"]["path"] == "/mnt/flux/run/R"
    assert "detect_cores=1" in by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]


def test_argv_reaches_the_container_exactly():
    argv = ["sh", "-c", 'echo "a  b" && exit 3', "$(HOME)", "$$", "*"]
    spec = minicluster_from_flags(argv, image="ubuntu", nodes=2, name="demo")
    container = lead_container(render(spec, cert=CERT))
    assert container["command"] == ["/bin/bash", "/etc/fluxhop/config/entrypoint.sh"]
    # The kubelet expands $(VAR) and turns $$ into $, so every $ is doubled.
    assert container["args"] == ["sh", "-c", 'echo "a  b" && exit 3', "$$(HOME)", "$$$$", "*"]
    unescaped = [a.replace("$$", "$") for a in container["args"]]
    assert unescaped == argv


def test_interactive_has_no_args_and_sets_rc2_none_in_the_script():
    spec = minicluster_from_flags([], image="ubuntu", nodes=2, name="demo")
    objects = render(spec, cert=CERT)
    assert "args" not in lead_container(objects)
    assert "interactive=1" in by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]


def test_flux_run_flags_take_whole_nodes_and_keep_the_users_slot_shape():
    spec = minicluster_from_flags(
        ["app"], image="x", nodes=2, tasks=4, cores_per_task=2, gpus_per_task=1, name="demo"
    )
    expected = "flux_run_args=(-N 2 -n 4 --exclusive -o cpu-affinity=off -c 2 -g 1)"
    assert expected in entrypoint_of(spec)  # -c/-g make a CPU request: R counts cores
    # fewer tasks than nodes: a node of its own for each task (Flux refuses -N > -n)
    assert "flux_run_args=(-N 2 -n 2 --exclusive)" in entrypoint_of(spec_of(size=4, tasks=2))
    # tasks: 0 is the operator's "-N size" alone, which Flux makes exclusive itself
    assert "flux_run_args=(-N 4)" in entrypoint_of(spec_of(size=4, tasks=0))


@pytest.mark.parametrize(
    ("resources", "options", "affinity"),
    [
        (None, None, []),  # R from the cores the broker finds: Flux binds as it likes
        ({"requests": {"cpu": "4"}}, None, ["-o", "cpu-affinity=off"]),
        (
            {"requests": {"cpu": "4"}},
            "-o cpu-affinity=per-task",
            ["-o", "cpu-affinity=off", "-o", "cpu-affinity=per-task"],
        ),
    ],
)
def test_tasks_are_not_bound_to_cores_r_only_counts(resources, options, affinity):
    """R's cores from a CPU request are a count, not the pod's CPUs: bound to
    them, the tasks of every pod on a node share its first CPUs. The user's
    own -o cpu-affinity comes last, and Flux takes the last."""
    spec = spec_of(size=2)
    if resources:
        spec.spec.containers[0].resources = ResourceRequirements.model_validate(resources)
    spec.spec.flux.option_flags = options
    flags = run_flags(render(spec, cert=CERT))
    assert flags[flags.index("--exclusive") + 1 :] == affinity


def test_a_file_without_tasks_runs_one_task_per_node():
    """The Flux Operator's default (tasks: 1, so flux run -n 1 on N nodes) is
    a known trap; fluxhop runs one task per node, as flux run -N does."""
    doc = minicluster_doc(size=3, containers=[{"image": "x", "command": "app"}])
    spec = MiniCluster.from_dict(doc)
    assert spec.spec.tasks is None and spec.spec.ntasks == 3
    assert "flux_run_args=(-N 3 -n 3 --exclusive)" in entrypoint_of(spec)
    doc["spec"]["tasks"] = 1
    assert "flux_run_args=(-N 1 -n 1 --exclusive)" in entrypoint_of(MiniCluster.from_dict(doc))


def test_flux_disabled_uses_the_image_flux_and_no_init_container():
    spec = spec_of(flux={"container": {"disable": True}})
    objects = render(spec, cert=CERT)
    assert "initContainers" not in pod_spec(objects)
    assert "init.sh" not in by_kind(objects)["ConfigMap"]["data"]
    assert "view_enabled=0" in by_kind(objects)["ConfigMap"]["data"]["entrypoint.sh"]


def test_view_init_container_copies_into_the_shared_volume():
    objects = render(
        spec_of(
            flux={
                "container": {
                    "image": "ghcr.io/converged-computing/flux-view-rocky:tag-9",
                    "volume": "copy",
                }
            }
        ),
        cert=CERT,
    )
    init = pod_spec(objects)["initContainers"][0]
    assert init["image"].endswith("flux-view-rocky:tag-9")
    assert init["command"] == ["/bin/bash", "/etc/fluxhop/config/init.sh"]
    assert {"name": "flux-view", "mountPath": "/mnt/flux"} in init["volumeMounts"]


def test_non_root_pods_get_an_fs_group_for_the_secret():
    spec = spec_of()
    spec.spec.containers[0].security_context = SecurityContext.model_validate(
        {"runAsUser": 1000, "runAsGroup": 1001}
    )
    context = pod_spec(render(spec, cert=CERT))["securityContext"]
    assert context == {"fsGroup": 1001, "seccompProfile": {"type": "RuntimeDefault"}}
    root = pod_spec(render(spec_of(), cert=CERT))["securityContext"]
    assert "fsGroup" not in root


def test_shm_is_a_writable_memory_volume():
    pod = pod_spec(render(spec_of(), cert=CERT))
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/dev/shm"].get("readOnly") is not True
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]["name"]]["emptyDir"] == {"medium": "Memory"}


def test_minicluster_target_round_trips_the_command():
    argv = ["sh", "-c", 'echo "a  b" && exit 3']
    spec = minicluster_from_flags(argv, image="ubuntu", nodes=3, name="demo")
    resource = render(spec, "minicluster")[0]
    validate(resource)
    assert shlex.split(resource["spec"]["containers"][0]["command"]) == argv
    assert resource["spec"]["size"] == 3
    assert "curveCert" not in json.dumps(resource)


def test_minicluster_target_passes_operator_features_on():
    text = (CONFORMANCE / "operator-examples" / "tests__batch__minicluster.yaml").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        spec = MiniCluster.from_yaml(text)
    resource = render(spec, "minicluster")[0]
    container = resource["spec"]["containers"][0]
    assert container["batch"] is True
    assert container["command"].count("\n") >= 5  # one job per line, as written
    validate(resource)


@pytest.mark.parametrize(
    "flags, scheduler",
    [
        ({}, {"queuePolicy": "easy"}),  # not the operator's fcfs: jobs wait for ranks up
        ({"max_size": 4, "queue_policy": "fcfs"}, {"queuePolicy": "fcfs"}),
        ({"max_size": 4, "queue_policy": "hybrid"}, {"queuePolicy": "hybrid"}),
        ({"max_size": 4, "simple_scheduler": True}, {"simple": True}),
    ],
)
def test_minicluster_target_schedules_as_fluxhops_own_pods(flags, scheduler):
    spec = minicluster_from_flags(["app"], image="ubuntu", nodes=2, name="demo", **flags)
    resource = render(spec, "minicluster")[0]
    validate(resource)
    assert resource["spec"]["flux"]["scheduler"] == scheduler


def test_name_too_long_for_jobset_hosts():
    spec = spec_of()
    spec = spec.renamed("a" * 57)  # a...-0 fits, a...-node-0-0 does not
    render(spec, "job", cert=CERT)
    with pytest.raises(SpecError, match="63"):
        render(spec, "jobset", cert=CERT)


def test_unknown_target():
    with pytest.raises(SpecError, match="target"):
        render(spec_of(), "deployment")


def test_config_map_stays_small_at_ten_thousand_nodes():
    def size(nodes: int) -> int:
        spec = minicluster_from_flags(["app"], image="x", nodes=nodes, cores_per_task=4, name="big")
        data = by_kind(render(spec, cert=CERT))["ConfigMap"]["data"]
        return sum(len(v.encode()) for v in data.values())

    assert size(10_000) - size(1) <= 64  # host lists and R are ranges, not lists
    assert size(10_000) <= 64 * 1024  # the scripts and the metrics program: far below 1 MiB
    spec = minicluster_from_flags(["app"], image="x", nodes=10_000, cores_per_task=4, name="big")
    config = by_kind(render(spec, cert=CERT))["ConfigMap"]
    r = ResourceSet.from_json(config["data"]["R"])
    assert r.nnodes == 10_000 and r.nodelist[-1] == "big-9999"


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_broker_pods_get_no_service_account_token_unless_asked(target):
    """They never call the API server (a token there is only something to steal)."""
    assert pod_spec(render(spec_of(), target, cert=CERT))["automountServiceAccountToken"] is False
    asked = spec_of(pod={"serviceAccountName": "runner", "automountServiceAccountToken": True})
    pod = pod_spec(render(asked, target, cert=CERT))
    assert pod["automountServiceAccountToken"] is True and pod["serviceAccountName"] == "runner"
