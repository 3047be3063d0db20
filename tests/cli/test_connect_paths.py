"""`fluxhop shell` / `proxy` run the connect helper where the pods really
have it, on every target and front door: the path comes from what render
recorded on the root, and here it is looked up in the rendered pod itself
(volume mount + ConfigMap item) - Kubeflow Trainer pods mount theirs at
/etc/flux-config, not /etc/fluxhop/config."""

from __future__ import annotations

import pytest

from fluxhop.cli.connect import OPERATOR_SHELL, shell_argv
from fluxhop.cli.trainer import marked_objects
from fluxhop.rabbit import RabbitRequest
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.workload import Root, prepare
from tests.rabbit.conftest import RABBITS, rabbit_job
from tests.trainer.conftest import EXAMPLES, documents, flux_runtime


def pod_of(workload: dict) -> dict:
    if workload["kind"] == "Job":
        return workload["spec"]["template"]["spec"]
    job = next(j for j in workload["spec"]["replicatedJobs"] if j["name"] == "node")
    return job["template"]["spec"]["template"]["spec"]


def file_at(objects: list[dict], container_name: str, path: str) -> str | None:
    """The ConfigMap key a pod's container sees at ``path``, if any."""
    pod = pod_of(objects[-1])
    container = next(c for c in pod["containers"] if c["name"] == container_name)
    volumes = {v["name"]: v for v in pod["volumes"]}
    maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    for mount in container["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        source = volumes[mount["name"]].get("configMap")
        if not path.startswith(prefix) or source is None:
            continue
        relative = path[len(prefix) :]
        data = maps[source["name"]]["data"]
        items = source.get("items") or [{"key": key, "path": key} for key in data]
        for item in items:
            if item["path"] == relative:
                return item["key"]
    return None


def job_spec():
    return minicluster_from_flags(["app"], image="x", nodes=2, name="demo")


def rabbit_spec():
    request = RabbitRequest.from_jobspec(rabbit_job({"command": "app"}))
    return request.to_minicluster(RABBITS, name="hop", uid=0, gid=0)


def trainer_objects():
    (job,) = documents(EXAMPLES / "examples__flux__lammps-train-job.yaml")
    return marked_objects(job, flux_runtime(), "cluster.local")


FRONT_DOORS = {
    "job": lambda: ("job", prepare(job_spec(), "job")),
    "jobset": lambda: ("jobset", prepare(job_spec(), "jobset")),
    "rabbit": lambda: ("job", prepare(rabbit_spec(), "job")),
    "trainer": lambda: ("jobset", trainer_objects()),
}


@pytest.mark.parametrize("door", FRONT_DOORS)
def test_shell_runs_the_connect_helper_the_pod_has(door):
    target, objects = FRONT_DOORS[door]()
    root = Root(target, objects[-1])
    argv = shell_argv("kubectl", [], root, "pod-0")
    assert argv[argv.index("--") + 1 :][0] == "bash"
    script = argv[-1]
    assert file_at(objects, root.container, script) == "connect.sh", script


def test_the_flux_operator_target_uses_the_operators_own_shell():
    objects = prepare(job_spec(), "minicluster")
    argv = shell_argv("kubectl", [], Root("minicluster", objects[-1]), "pod-0")
    assert argv[-3:] == ["bash", "-c", OPERATOR_SHELL]


def test_the_trainer_path_is_not_fluxhops_own():
    root = Root("jobset", trainer_objects()[-1])
    assert shell_argv("kubectl", [], root, "p")[-1] == "/etc/flux-config/connect.sh"
    assert root.container == "node"


@pytest.mark.parametrize("door", FRONT_DOORS)
def test_the_root_records_what_later_verbs_need(door):
    """No verb re-derives these: render wrote them on the root."""
    target, objects = FRONT_DOORS[door]()
    annotations = objects[-1]["metadata"]["annotations"]
    for key in ("fluxhop.io/flux-root", "fluxhop.io/config-dir", "fluxhop.io/lead-container"):
        assert annotations[key]
    assert objects[-1]["metadata"]["labels"]["fluxhop.io/target"] == target
    lead = annotations["fluxhop.io/lead-container"]
    assert lead in [c["name"] for c in pod_of(objects[-1])["containers"]]
