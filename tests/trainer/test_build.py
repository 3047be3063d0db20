"""TrainJob + Flux runtime -> [ConfigMap, Secret, JobSet], checked against
the real schemas and run in a simulated pod (real bash, stand-in flux)."""

from __future__ import annotations

import base64
import copy
import tomllib

import pytest

from fluxhop.flux import hostlist
from fluxhop.flux.curve import CurveCert
from fluxhop.trainer import TrainerError, build
from tests.render.podsim import Pod
from tests.schemas import validate
from tests.trainer.conftest import (
    CERT,
    EXAMPLES,
    documents,
    flux_runtime,
    node_container,
    node_pod,
    runtime_with,
    trainjob,
)

FLUX_TRAINJOBS = sorted(EXAMPLES.glob("examples__flux__*.yaml"))
FLUX_TRAINJOBS = [p for p in FLUX_TRAINJOBS if documents(p)[0]["kind"] == "TrainJob"]


def run_args(nodes: int, tasks: int) -> str:
    """The entrypoint's flux run flags: whole nodes, R's cores being slots."""
    return f"flux_run_args=(-N {nodes} -n {tasks} --exclusive -o cpu-affinity=off)"


def test_the_flux_examples_are_all_here():
    assert {p.name for p in FLUX_TRAINJOBS} >= {
        "examples__flux__lammps-train-job.yaml",
        "examples__flux__flux-interactive.yaml",
    }


@pytest.mark.parametrize("path", FLUX_TRAINJOBS, ids=lambda p: p.name)
def test_every_flux_example_renders_valid_objects(path, runtime):
    (job,) = documents(path)
    validate(job)  # the inputs themselves pass the Trainer CRDs
    validate(runtime)
    objects = build(job, runtime, cert=CERT)
    assert [o["kind"] for o in objects] == ["ConfigMap", "Secret", "JobSet"]
    for obj in objects:
        validate(obj)  # kubernetes-validate and the JobSet CRD
    name = job["metadata"]["name"]
    jobset = objects[-1]
    assert jobset["metadata"]["name"] == name
    assert objects[0]["metadata"]["name"] == f"{name}-flux-entrypoint"
    assert objects[1]["metadata"]["name"] == f"{name}-flux-curve"
    nodes = job["spec"]["trainer"]["numNodes"]
    node = jobset["spec"]["replicatedJobs"][0]
    assert node["replicas"] == 1
    assert node["template"]["spec"]["parallelism"] == nodes
    assert hostlist.decode(objects[0]["data"]["hostlist"].strip()) == [
        f"{name}-node-0-{i}" for i in range(nodes)
    ]


NON_FLUX = [
    "manifests__base__runtimes__torch_distributed.yaml",
    "manifests__base__runtimes__deepspeed_distributed.yaml",
    "manifests__base__runtimes__data-cache__torch_distributed_with_cache.yaml",
    "manifests__base__runtimes__torchtune__llama3_2__llama3_2_1B.yaml",
    "manifests__base__runtimes__torchtune__qwen2_5__qwen2_5_1.5B.yaml",
    "examples__yaml__04-volcano-integration.yaml",
]


@pytest.mark.parametrize("filename", NON_FLUX)
def test_non_flux_runtimes_are_left_alone(filename):
    runtimes = [d for d in documents(EXAMPLES / filename) if d["kind"].endswith("TrainingRuntime")]
    assert runtimes
    for runtime in runtimes:
        job = trainjob(runtime=runtime["metadata"]["name"], numNodes=2)
        assert build(job, runtime) is None


@pytest.mark.parametrize(
    "filename", ["examples__yaml__01-multi-node.yaml", "examples__yaml__03-kueue-integration.yaml"]
)
def test_torch_trainjob_examples_give_none(filename):
    (torch,) = documents(EXAMPLES / "manifests__base__runtimes__torch_distributed.yaml")
    (job,) = [d for d in documents(EXAMPLES / filename) if d["kind"] == "TrainJob"]
    assert build(job, torch) is None


def run_pod(tmp_path, objects, rank, hostname, **env):
    return Pod(tmp_path / f"rank{rank}", objects, rank, hostname, env=dict(env))


ARGV = ["python3", "-c", "import sys; print(sys.argv[1:])", "two words", "$HOME", "*", "a;b"]


def test_argv_arrives_exactly_and_the_exit_code_propagates(tmp_path, runtime):
    """Fixes: the plugin joined argv into one string (re-split by the shell,
    globbed) and its pods always exited 0."""
    job = trainjob(numNodes=2, command=ARGV[:3], args=ARGV[3:])
    objects = build(job, runtime, cert=CERT)
    lead = run_pod(tmp_path, objects, 0, "demo-node-0-0")
    done = lead.run()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr(ARGV[3:])
    run_call = next(c for c in lead.calls() if c["argv"][0] == "run")
    flags = ["-N", "2", "-n", "2", "--exclusive", "-o", "cpu-affinity=off"]
    assert run_call["argv"] == ["run", *flags, *ARGV]

    failing = build(trainjob(numNodes=2, command=["sh", "-c", "exit 7"]), runtime, cert=CERT)
    assert run_pod(tmp_path / "f", failing, 0, "demo-node-0-0").run().returncode == 7


def test_a_worker_pod_starts_a_broker_that_finds_its_files(tmp_path, runtime):
    objects = build(trainjob(numNodes=3, command=["hostname"]), runtime, cert=CERT)
    worker = run_pod(tmp_path, objects, 2, "demo-node-0-2")
    done = worker.run()
    assert done.returncode == 0, done.stderr
    (start,) = [c for c in worker.calls() if c["argv"][0] == "start"]
    assert f"--config-path={worker.config_dir}" in start["argv"]
    assert (worker.flux_root / "run" / "curve.cert").stat().st_mode & 0o777 == 0o400


def test_shared_memory_is_writable(runtime):
    container = node_container(build(trainjob(numNodes=1), runtime, cert=CERT))
    shm = next(m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm")
    assert shm["name"] == "shared-memory" and not shm.get("readOnly", False)


@pytest.mark.parametrize(
    ("trainer", "policy", "nodes", "procs"),
    [
        (
            {"numNodes": 3, "numProcPerNode": 2},
            {"numNodes": 1, "flux": {"numProcPerNode": 4}},
            3,
            2,
        ),
        ({}, {"numNodes": 4, "flux": {"numProcPerNode": 2}}, 4, 2),  # plugin crashed: no numNodes
        ({"numNodes": 2}, {"numNodes": None, "flux": {}}, 2, 1),  # plugin crashed: nil npp
        (None, {"numNodes": None, "flux": {}}, 1, 1),  # plugin crashed: no spec.trainer
    ],
)
def test_fallbacks(trainer, policy, nodes, procs):
    job = trainjob() if trainer is None else trainjob(**trainer)
    if trainer == {}:
        job["spec"]["trainer"] = {}
    runtime = runtime_with(policy=policy)
    objects = build(job, runtime, cert=CERT)
    assert objects[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == nodes
    entrypoint = objects[0]["data"]["entrypoint.sh"]
    assert run_args(nodes, nodes * procs) in entrypoint
    r = objects[0]["data"]["R"]
    assert f'"children": {{"core": "{"0" if procs == 1 else f"0-{procs - 1}"}"}}' in r


def test_custom_subdomain_is_used_for_brokers(runtime):
    runtime = runtime_with(network={"subdomain": "flux-net"})
    objects = build(trainjob(numNodes=2), runtime, cert=CERT)
    broker = objects[0]["data"]["broker.toml"]
    assert 'default_connect = "tcp://%h.flux-net.default.svc.cluster.local:%p"' in broker
    assert objects[-1]["spec"]["network"]["subdomain"] == "flux-net"
    for obj in objects:
        validate(obj)


@pytest.mark.parametrize(("procs", "gpus"), [(1, 4), (4, 4), (2, 4), (8, 4), (3, 2)])
def test_the_job_owns_every_gpu_of_its_nodes(procs, gpus):
    """The plugin passed the per-node count to -g, which Flux reads per task;
    dividing instead rounds 4 GPUs over 8 ranks down to none. The job takes
    whole nodes, so every GPU that R declares is allocated to it."""
    job = trainjob(
        numNodes=2,
        numProcPerNode=procs,
        command=["train"],
        resourcesPerNode={"limits": {"nvidia.com/gpu": gpus}},
    )
    objects = build(job, flux_runtime(), cert=CERT)
    expected = run_args(2, 2 * procs)
    assert expected in objects[0]["data"]["entrypoint.sh"]
    assert f'"gpu": "0-{gpus - 1}"' in objects[0]["data"]["R"]
    assert node_container(objects)["resources"] == {"limits": {"nvidia.com/gpu": gpus}}


def test_gpus_from_the_runtime_container():
    runtime = runtime_with(
        resources={"requests": {"amd.com/gpu": "2"}, "limits": {"amd.com/gpu": "2"}}
    )
    objects = build(trainjob(numNodes=1, command=["x"]), runtime, cert=CERT)
    assert run_args(1, 1) in objects[0]["data"]["entrypoint.sh"]
    assert '"gpu": "0-1"' in objects[0]["data"]["R"]


def test_curve_key_is_random_not_derived_from_the_uid(runtime):
    job = trainjob(numNodes=1)
    job["metadata"]["uid"] = "12345-67890"
    keys = set()
    for _ in range(2):
        secret = build(copy.deepcopy(job), runtime)[1]
        cert = CurveCert.from_zpl(base64.b64decode(secret["data"]["curve.cert"]).decode())
        keys.add(cert.secret_key)
    assert len(keys) == 2


def test_settings_precedence_trainjob_over_runtime_over_defaults():
    runtime = runtime_with(
        env=[
            {"name": "FLUX_VIEW_IMAGE", "value": "runtime/view:1"},
            {"name": "FLUX_NETWORK_DEVICE", "value": "ens5"},
            {"name": "OTHER", "value": "kept"},
        ]
    )
    job = trainjob(numNodes=1, env=[{"name": "FLUX_VIEW_IMAGE", "value": "job/view:2"}])
    objects = build(job, runtime, cert=CERT)
    installer = node_pod(objects)["initContainers"][-1]
    assert installer["name"] == "flux-installer" and installer["image"] == "job/view:2"
    broker = objects[0]["data"]["broker.toml"]
    assert 'default_bind = "tcp://ens5:%p"' in broker
    assert 'queue-policy = "fcfs"' in broker
    env = {e["name"]: e.get("value") for e in node_container(objects)["env"]}
    assert env == {"FLUX_VIEW_IMAGE": "job/view:2", "FLUX_NETWORK_DEVICE": "ens5", "OTHER": "kept"}


def test_defaults_without_settings(runtime):
    objects = build(trainjob(numNodes=1), runtime, cert=CERT)
    installer = node_pod(objects)["initContainers"][-1]
    assert installer["image"] == "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
    assert 'default_bind = "tcp://eth0:%p"' in objects[0]["data"]["broker.toml"]


@pytest.mark.parametrize("procs", [1, 4, 64])
def test_num_proc_per_node_cores_are_slots_flux_neither_checks_nor_binds(runtime, procs):
    """R gives each node numProcPerNode cores (slots, unchecked against the
    node); with Flux's default verification a node with fewer CPUs is drained
    and the job waits forever, and with its default cpu-affinity 1 rank per
    node is bound to 1 CPU of the node."""
    objects = build(trainjob(numNodes=2, numProcPerNode=procs), runtime, cert=CERT)
    resource = tomllib.loads(objects[0]["data"]["broker.toml"])["resource"]
    assert resource["verify"] == {
        "default": "allow-extra",
        "hostname": "strict",
        "core": "ignore",
        "gpu": "ignore",
    }
    assert "noverify" not in resource  # hostnames are still checked against R
    entrypoint = objects[0]["data"]["entrypoint.sh"]
    assert run_args(2, 2 * procs) in entrypoint


def test_owner_references_only_when_the_uid_is_known(runtime):
    assert all(
        "ownerReferences" not in o["metadata"] for o in build(trainjob(), runtime, cert=CERT)
    )
    job = trainjob()
    job["metadata"]["uid"] = "abc"
    for obj in build(job, runtime, cert=CERT):
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "demo",
            "uid": "abc",
            "controller": True,
            "blockOwnerDeletion": True,
        }


def test_runtime_args_are_the_base_and_never_run_twice():
    """The plugin left runtime args on the container and appended them again."""
    runtime = runtime_with(command=["python"], args=["train.py"])
    container = node_container(build(trainjob(numNodes=1), runtime, cert=CERT))
    assert container["args"] == ["python", "train.py"]
    container = node_container(build(trainjob(numNodes=1, args=["other.py"]), runtime, cert=CERT))
    assert container["args"] == ["python", "other.py"]


def test_no_command_is_an_interactive_instance(runtime):
    objects = build(trainjob(numNodes=2), runtime, cert=CERT)
    assert "args" not in node_container(objects)
    assert "interactive=1" in objects[0]["data"]["entrypoint.sh"]


def test_other_replicated_jobs_and_init_containers_are_kept():
    runtime = flux_runtime()
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    initializer = {
        "name": "dataset-initializer",
        "template": {
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": "dataset-initializer", "image": "init:1"}],
                    }
                }
            }
        },
    }
    jobs.insert(0, initializer)
    pod = jobs[1]["template"]["spec"]["template"]["spec"]
    pod["initContainers"] = [{"name": "warmup", "image": "busybox"}]
    objects = build(trainjob(numNodes=2, command=["x"]), runtime, cert=CERT)
    built = objects[-1]["spec"]["replicatedJobs"]
    assert built[0] == initializer
    assert [c["name"] for c in node_pod(objects)["initContainers"]] == ["warmup", "flux-installer"]
    validate(objects[-1])


def test_same_input_same_bytes(runtime):
    job = trainjob(numNodes=3, command=["a"])
    assert build(job, runtime, cert=CERT) == build(copy.deepcopy(job), runtime, cert=CERT)


BAD = [
    (
        lambda j, r: r["spec"]["mlPolicy"].update(mpi={}),
        "sets mpi and flux; a runtime has one ML policy",
    ),
    (lambda j, r: r["spec"]["mlPolicy"]["flux"].update(numProcPerNode=0), "numProcPerNode is 0"),
    (
        lambda j, r: j["spec"].update(trainer={"numProcPerNode": 0}),
        "spec.trainer.numProcPerNode is 0",
    ),
    (lambda j, r: j["spec"].update(trainer={"numNodes": 0}), "spec.trainer.numNodes is 0"),
    (
        lambda j, r: r["spec"]["template"]["spec"]["replicatedJobs"][0].update(name="worker"),
        "has no replicated job named 'node'",
    ),
    (
        lambda j, r: r["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
            "template"
        ]["spec"].update(initContainers=[{"name": "flux-installer", "image": "x"}]),
        "'flux-installer' is reserved",
    ),
    (lambda j, r: j["spec"]["runtimeRef"].update(name="other"), "uses runtime 'other'"),
    (lambda j, r: j["spec"].update(trainer={"command": "python x.py"}), "command must be an array"),
    (lambda j, r: j["spec"].update(trainer={"command": ["flux", "run", "x"]}), "starts with flux"),
    (
        lambda j, r: j["spec"].update(
            trainer={"env": [{"name": "FLUX_QUEUE_POLICY", "value": "lifo"}]}
        ),
        "FLUX_QUEUE_POLICY='lifo'",
    ),
    (
        lambda j, r: r["spec"]["template"]["spec"].update(network={"enableDNSHostnames": False}),
        "enableDNSHostnames is false",
    ),
    (lambda j, r: j["metadata"].update(name="Bad_Name"), "must be a DNS label"),
]


@pytest.mark.parametrize(("mutate", "words"), BAD)
def test_bad_input_is_one_line(mutate, words):
    job, runtime = trainjob(numNodes=1), flux_runtime()
    mutate(job, runtime)
    with pytest.raises(TrainerError) as caught:
        build(job, runtime)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_name_too_long_for_host_names():
    job = trainjob(name="a" * 60, numNodes=2)
    with pytest.raises(TrainerError, match="63 characters"):
        build(job, flux_runtime())


def test_scripts_pass_bash_n_and_shellcheck(tmp_path, runtime):
    from tests.render.test_scripts import check_scripts

    objects = build(trainjob(numNodes=2, command=["x"]), runtime, cert=CERT)
    assert {"entrypoint.sh", "init.sh", "connect.sh"} <= set(check_scripts(objects, tmp_path))


def node_job_spec(objects: list[dict]) -> dict:
    jobset = objects[-1]
    return next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node")["template"][
        "spec"
    ]


@pytest.mark.parametrize("path", FLUX_TRAINJOBS, ids=lambda p: p.name)
def test_a_failing_command_fails_once_and_is_not_retried(path, runtime):
    """The plugin left backoffLimit unset (Kubernetes' default 6) and set no
    JobSet failurePolicy, so a failing training command ran up to seven times."""
    objects = build(documents(path)[0], runtime, cert=CERT)
    job = node_job_spec(objects)
    assert job["backoffLimit"] == 0
    assert job["podFailurePolicy"]["rules"][0]["action"] == "Ignore"  # evictions do not count
    assert objects[-1]["spec"]["failurePolicy"] == {"maxRestarts": 0}
    assert node_pod(objects)["restartPolicy"] == "Never"
    validate(objects[-1])


def test_retry_settings_the_runtime_chose_are_kept():
    runtime = copy.deepcopy(flux_runtime())
    template = runtime["spec"]["template"]["spec"]
    template["failurePolicy"] = {"maxRestarts": 2}
    template["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 1
    objects = build(trainjob(numNodes=2, command=["x"]), runtime, cert=CERT)
    assert node_job_spec(objects)["backoffLimit"] == 1
    assert objects[-1]["spec"]["failurePolicy"] == {"maxRestarts": 2}


@pytest.mark.parametrize("name", ["1", "gpu", "storage"])
def test_a_resource_the_api_server_would_refuse_is_refused_here(name):
    """A limit whose key is no container resource name never reaches a pod."""
    job = trainjob(numNodes=1, command=["x"], resourcesPerNode={"limits": {name: 1}})
    with pytest.raises(
        TrainerError, match=rf"resourcesPerNode\.limits: '{name}' is not a container resource"
    ):
        build(job, flux_runtime(), cert=CERT)
