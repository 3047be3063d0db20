"""Every pod fluxhop renders against the Pod Security Standards (tests/pss.py):
baseline always, except where the input itself asks for what baseline
forbids; restricted under ``securityProfile: restricted``, or a one-line
refusal that names what cannot pass."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import pytest
import yaml

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.rabbit import RabbitRequest
from fluxhop.rabbit.builder import HOST_DIRECTORIES
from fluxhop.render import render
from fluxhop.render.security import CMA_OFF
from fluxhop.spec import MiniCluster
from fluxhop.spec.fluxsettings import DEFAULT_VIEW_IMAGE
from fluxhop.trainer import build as trainer_build
from tests.conformance import CONFORMANCE
from tests.documents import mappings
from tests.pss import BASELINE_CAPABILITIES, pod_specs, violations
from tests.rabbit.conftest import RABBITS, rabbit_job, workflow_object
from tests.render.test_render import CERT, lead_container, pod_spec, spec_of
from tests.schemas import validate
from tests.trainer.conftest import EXAMPLES as TRAINER_EXAMPLES
from tests.trainer.conftest import documents, flux_runtime

EXAMPLES = sorted((CONFORMANCE / "operator-examples").glob("*.yaml"))
POD_TARGETS = ("job", "jobset")


def quiet_render(spec: MiniCluster, target: str) -> list[dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        return render(spec, target, cert=CERT)


def load(document: dict[str, Any]) -> MiniCluster:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        return MiniCluster.from_dict(document)


def asked_for(document: dict[str, Any]) -> set[str]:
    """The baseline rules a MiniCluster document itself asks to break."""
    asked: set[str] = set()
    for node in mappings(document):
        if node.get("hostPath"):
            asked.add("hostPath volumes")
        if node.get("privileged") is True:
            asked.add("privileged containers")
        if node.get("hostIPC") or node.get("hostPID"):
            asked.add("host namespaces")
        added = (node.get("capabilities") or {}).get("add") or node.get("addCapabilities")
        if added and set(added) - BASELINE_CAPABILITIES:
            asked.add("capabilities")
    return asked


def rules(found: list[str]) -> set[str]:
    return {item.partition(":")[0] for item in found}


# --- the checker itself -----------------------------------------------------------


def test_a_plain_restricted_pod_passes_and_each_breach_is_named():
    pod = {
        "spec": {
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "app",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    }
    assert violations(pod, "restricted") == []
    breaches = {
        "host namespaces": ("spec", "hostPID", True),
        "privileged containers": ("container", "privileged", True),
        "capabilities": ("container", "capabilities", {"add": ["SYS_ADMIN"], "drop": ["ALL"]}),
        "seccomp": ("pod", "seccompProfile", {"type": "Unconfined"}),
        "/proc mount type": ("container", "procMount", "Unmasked"),
        "SELinux": ("container", "seLinuxOptions", {"type": "spc_t"}),
        "sysctls": ("pod", "sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
        "running as non-root user": ("pod", "runAsUser", 0),
        "privilege escalation": ("container", "allowPrivilegeEscalation", True),
    }
    for rule, (where, key, value) in breaches.items():
        broken = copy.deepcopy(pod)
        target = {
            "spec": broken["spec"],
            "pod": broken["spec"]["securityContext"],
            "container": broken["spec"]["containers"][0]["securityContext"],
        }[where]
        target[key] = value
        assert rule in rules(violations(broken, "restricted")), rule
    host = copy.deepcopy(pod)
    host["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    assert {"hostPath volumes", "volume types"} <= rules(violations(host, "restricted"))
    assert rules(violations(host, "baseline")) == {"hostPath volumes"}


# --- baseline, everywhere ---------------------------------------------------------


@pytest.mark.parametrize("target", POD_TARGETS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_baseline_unless_it_asks_otherwise(path, target):
    document = yaml.safe_load(path.read_text())
    objects = quiet_render(load(document), target)
    templates = pod_specs(objects)
    assert templates
    for where, template in templates:
        found = violations(template, "baseline")
        assert rules(found) <= asked_for(document), (where, found)
        assert "automountServiceAccountToken" in template["spec"]


def test_fluxhop_adds_no_breach_of_its_own():
    """The default pod asks for nothing, so it passes baseline outright and
    runs under the runtime's seccomp profile."""
    for target in POD_TARGETS:
        template = pod_specs(render(spec_of(), target, cert=CERT))[0][1]
        assert violations(template, "baseline") == []
        assert template["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_trainer_jobsets_pass_baseline():
    runtime = flux_runtime()
    trainjobs = [
        doc
        for path in sorted(TRAINER_EXAMPLES.glob("examples__flux__*.yaml"))
        for doc in documents(path)
        if doc["kind"] == "TrainJob"
    ]
    assert trainjobs
    for job in trainjobs:
        for where, template in pod_specs(trainer_build(job, runtime, cert=CERT)):
            assert violations(template, "baseline") == [], where


@pytest.mark.parametrize("target", POD_TARGETS)
def test_rabbit_pods_break_baseline_only_by_the_host_paths_nnf_needs(target):
    """NNF's MPI workers read the CXI NIC from sysfs and the rabbit file
    systems from the host: those hostPath volumes are the one exception."""
    request = RabbitRequest.from_jobspec(rabbit_job({}))
    spec = request.to_minicluster(RABBITS, name="fluxjob-1", uid=1001, gid=2001)
    ((_, template),) = pod_specs(quiet_render(spec, target))
    host_paths = {
        v["name"]: v["hostPath"]["path"] for v in template["spec"]["volumes"] if "hostPath" in v
    }
    assert host_paths == dict(HOST_DIRECTORIES)
    assert violations(template, "baseline") == [f"hostPath volumes: {n}" for n in host_paths]
    added = template["spec"]["containers"][0]["securityContext"]["capabilities"]["add"]
    assert set(added) <= BASELINE_CAPABILITIES and "NET_BIND_SERVICE" in added


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_rabbit_pods_with_nnfs_ports_publish_them_on_the_host(target):
    """A Workflow whose profile asks for ports: its pods publish them on each
    rabbit as NNF does, which baseline forbids too."""
    flow = workflow_object(name="fluxjob-1")
    flow["status"] = {"env": {"NNF_CONTAINER_PORTS": "30000,30001"}}
    request = RabbitRequest.from_jobspec(rabbit_job({}))
    spec = request.to_minicluster(RABBITS, name="fluxjob-1", uid=1001, gid=2001, workflow=flow,
                                  target=target)  # fmt: skip
    ((_, template),) = pod_specs(quiet_render(spec, target))
    found = violations(template, "baseline")
    assert [v for v in found if v.startswith("host ports")] == [
        "host ports: containers[fluxjob-1] 30000",
        "host ports: containers[fluxjob-1] 30001",
    ], found
    assert all(v.startswith(("host ports", "hostPath")) for v in found), found


# --- restricted -------------------------------------------------------------------


def restricted(document: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(document)
    spec = out["spec"]
    spec.setdefault("pod", {})["securityProfile"] = "restricted"
    spec.setdefault("flux", {}).setdefault("container", {})["disable"] = True
    return out


@pytest.mark.parametrize("target", POD_TARGETS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_restricted_under_the_profile_or_is_refused(path, target):
    document = restricted(yaml.safe_load(path.read_text()))
    asked = asked_for(document)
    if asked:
        with pytest.raises(SpecError, match=r"pod\.securityProfile restricted: ") as err:
            load(document)
        assert "\n" not in str(err.value)
        return
    objects = quiet_render(load(document), target)
    for obj in objects:
        validate(obj)
    for where, template in pod_specs(objects):
        assert violations(template, "restricted") == [], where


def test_restricted_pods_run_as_a_non_root_user_that_can_read_the_secret():
    spec = load(restricted(spec_of().model_dump(by_alias=True, exclude_none=True)))
    pod = pod_spec(quiet_render(spec, "job"))
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == context["runAsGroup"] == context["fsGroup"] == 1000
    assert "initContainers" not in pod  # no Flux view: Flux comes with the image
    lead = pod["containers"][0]["securityContext"]
    assert lead == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_restricted_keeps_the_users_own_ids():
    document = restricted(spec_of().model_dump(by_alias=True, exclude_none=True))
    document["spec"]["containers"][0]["securityContext"] = {"runAsUser": 4321}
    context = pod_spec(quiet_render(load(document), "job"))["securityContext"]
    assert "runAsUser" not in context  # the container's 4321 applies
    assert context["runAsGroup"] == context["fsGroup"] == 4321


@pytest.mark.parametrize("volume", ["auto", "image", "copy"])
def test_restricted_runs_with_the_flux_view_mounted_not_copied_in_the_container(volume):
    """A restricted pod is never root: the view's /opt/software is never
    copied in the container. Mounted from its image ("auto" renders so),
    the image is a read-only volume (restricted allows it) whose subPaths
    are the view and the Spack tree, and there is no init container; copied,
    the init container's copy is mounted read-only."""
    document = restricted(spec_of().model_dump(by_alias=True, exclude_none=True))
    document["spec"]["flux"]["container"].update(disable=False, volume=volume)
    rendered = quiet_render(load(document), "job")
    lead, pod = lead_container(rendered), pod_spec(rendered)
    software = [
        m for m in lead["volumeMounts"] if m["mountPath"] in ("/opt/software", "/mnt/flux/view")
    ]
    if volume == "copy":
        view = pod["initContainers"][0]["name"]
        assert software == [
            {"name": view, "mountPath": "/opt/software", "subPath": "software", "readOnly": True}
        ]
    else:
        assert "initContainers" not in pod
        image = next(v for v in pod["volumes"] if v["name"] == "fluxhop-view")
        assert image == {"name": "fluxhop-view", "image": {
            "reference": document["spec"]["flux"]["container"].get("image", DEFAULT_VIEW_IMAGE),
            "pullPolicy": "IfNotPresent"}}  # fmt: skip
        assert software == [
            {"name": "fluxhop-view", "mountPath": "/mnt/flux/view", "subPath": "opt/views/view",
             "readOnly": True},
            {"name": "fluxhop-view", "mountPath": "/opt/software", "subPath": "opt/software",
             "readOnly": True},
        ]  # fmt: skip
        assert "init.sh" not in next(o for o in rendered if o["kind"] == "ConfigMap")["data"]
    entrypoint = next(o for o in rendered if o["kind"] == "ConfigMap")["data"]["entrypoint.sh"]
    assert "cp -a" not in entrypoint and "/opt/software/" not in entrypoint


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"pod": {"hostPID": True}}, "hostIPC and pod.hostPID"),
        ({"pod": {"securityContext": {"runAsUser": 0}}}, "runs as root"),
        ({"containers": [{"securityContext": {"privileged": True}}]}, "asks for privilege"),
        (
            {"containers": [{"securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}]},
            "adds capabilities SYS_PTRACE; only NET_BIND_SERVICE",
        ),
        (
            {"containers": [{"volumes": {"data": {"path": "/data", "hostPath": "/srv"}}}]},
            "hostPath volume, .* persistentVolumeClaim",
        ),
    ],
)
def test_what_cannot_be_restricted_is_refused_in_one_line(change, says):
    document = restricted(spec_of().model_dump(by_alias=True, exclude_none=True))
    spec = document["spec"]
    for key, value in change.items():
        if key == "containers":
            spec["containers"][0].update(value[0])
        else:
            for inner, setting in value.items():
                if isinstance(setting, dict) and isinstance(spec.get(key, {}).get(inner), dict):
                    spec[key][inner].update(setting)
                else:
                    spec.setdefault(key, {})[inner] = setting
    with pytest.raises(SpecError, match=says) as err:
        load(document)
    assert "\n" not in str(err.value)


# --- seccomp and MPI ---------------------------------------------------------------


def test_runtime_default_seccomp_turns_mpi_cma_off_only_where_fluxhop_chose_it():
    env = {e["name"]: e.get("value") for e in lead_container(render(spec_of(), cert=CERT))["env"]}
    assert CMA_OFF.items() <= env.items()
    for pod in (
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
        {
            "securityContext": {
                "seccompProfile": {"type": "Localhost", "localhostProfile": "mpi.json"}
            }
        },
    ):
        spec = spec_of(pod=pod)
        lead = lead_container(render(spec, cert=CERT))
        assert not set(CMA_OFF) & {e["name"] for e in lead.get("env", [])}
        assert (
            pod_spec(render(spec, cert=CERT))["securityContext"]["seccompProfile"]
            == (pod["securityContext"]["seccompProfile"])
        )
    ptrace = spec_of(
        containers=[
            {
                "image": "ubuntu:noble",
                "command": "hostname",
                "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}},
            }
        ]
    )
    assert not set(CMA_OFF) & {
        e["name"] for e in lead_container(render(ptrace, cert=CERT)).get("env", [])
    }
    own = spec_of(
        containers=[
            {
                "image": "ubuntu:noble",
                "command": "hostname",
                "environment": {"OMPI_MCA_smsc": "cma"},
            }
        ]
    )
    env = {e["name"]: e.get("value") for e in lead_container(render(own, cert=CERT))["env"]}
    assert env["OMPI_MCA_smsc"] == "cma"
