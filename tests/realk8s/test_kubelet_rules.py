"""The test kubelet's pure rules, checked against what Kubernetes documents:
phases and conditions, environment expansion, volume layouts, pod DNS files.
These run everywhere; the cluster tests prove the same rules end to end."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.realk8s.kubelet import network
from tests.realk8s.kubelet.containers import ConfigError, base_env, container_spec
from tests.realk8s.kubelet.environment import EnvError, container_env, expand
from tests.realk8s.kubelet.network import NodeNetwork, hosts_file, pod_hostname, resolv_conf
from tests.realk8s.kubelet.status import Container, pod_status
from tests.realk8s.kubelet.volumes import Volume, VolumeError, materialize, plan


def pod(**spec) -> dict:
    return {
        "metadata": {
            "name": "p-0-abcde",
            "namespace": "ns",
            "uid": "u1",
            "labels": {"app": "x"},
            "annotations": {"a": "b"},
        },
        "spec": {"containers": [{"name": "c", "image": "i", "command": ["true"]}], **spec},
        "status": {"podIP": "198.19.1.2", "hostIP": "127.0.0.1"},
    }


def status(p: dict, *containers: Container) -> dict:
    return pod_status(
        p,
        list(containers),
        pod_ip="198.19.1.2",
        host_ip="127.0.0.1",
        start_time="2026-01-01T00:00:00Z",
        sandbox_ready=True,
    )


def ended(name: str, code: int, init: bool = False) -> Container:
    return Container(
        name,
        "i",
        init=init,
        state="terminated",
        exit_code=code,
        reason="Completed" if code == 0 else "Error",
    )


# --- phases ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "code", "phase"),
    [
        ("Never", 0, "Succeeded"),
        ("Never", 3, "Failed"),
        ("OnFailure", 3, "Running"),
        ("OnFailure", 0, "Succeeded"),
        ("Always", 0, "Running"),
    ],
)
def test_phase_of_ended_containers(policy, code, phase):
    assert status(pod(restartPolicy=policy), ended("c", code))["phase"] == phase


def test_a_failed_init_container_fails_a_never_pod_and_holds_the_others():
    p = pod(restartPolicy="Never", initContainers=[{"name": "i", "image": "i"}])
    failed = status(p, ended("i", 1, init=True), Container("c", "i"))
    assert failed["phase"] == "Failed"
    running_init = status(p, Container("i", "i", init=True, state="running"), Container("c", "i"))
    assert running_init["phase"] == "Pending"
    conditions = {c["type"]: c["status"] for c in running_init["conditions"]}
    assert conditions["Initialized"] == "False" and conditions["Ready"] == "False"


def test_ready_only_while_every_container_runs():
    p = pod(restartPolicy="Never")
    running = status(p, Container("c", "i", state="running", started_at="t"))
    assert running["phase"] == "Running"
    assert {c["type"]: c["status"] for c in running["conditions"]}["Ready"] == "True"
    assert running["containerStatuses"][0]["state"] == {"running": {"startedAt": "t"}}
    done = status({**p, "status": running}, ended("c", 0))
    ready = next(c for c in done["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "PodCompleted"


def test_transition_time_kept_while_a_condition_holds():
    p = pod(restartPolicy="Never")
    first = status(p, Container("c", "i", state="running"))
    stamp = next(c for c in first["conditions"] if c["type"] == "Ready")["lastTransitionTime"]
    again = status(
        {
            **p,
            "status": {
                "conditions": [{**c, "lastTransitionTime": "old"} for c in first["conditions"]]
            },
        },
        Container("c", "i", state="running"),
    )
    assert stamp != "old"
    assert (
        next(c for c in again["conditions"] if c["type"] == "Ready")["lastTransitionTime"] == "old"
    )


def test_terminated_state_carries_exit_code_reason_and_signal():
    c = ended("c", 137)
    c.signal = 9
    state = c.api()["state"]["terminated"]
    assert (state["exitCode"], state["reason"], state["signal"]) == (137, "Error", 9)


# --- environment ---------------------------------------------------------------------
def test_expansion_follows_kubernetes():
    env = {"A": "x"}
    assert expand("$(A)-$$(A)-$(B)-$$-$", env) == "x-$(A)-$(B)-$-$"


def test_env_order_references_and_downward_values():
    container = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "P_"}],
        "env": [
            {"name": "ONE", "value": "1"},
            {"name": "TWO", "value": "$(ONE)2$(THREE)"},
            {"name": "THREE", "value": "3"},
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "LBL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {
                "name": "GONE",
                "valueFrom": {"secretKeyRef": {"name": "s", "key": "x", "optional": True}},
            },
            {
                "name": "MEM",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
        ],
        "resources": {"limits": {"memory": "1Gi"}},
    }
    data = {("ConfigMap", "cm"): {"X": "cm"}, ("Secret", "s"): {"k": "secret"}}
    env = container_env(
        container, pod(), lambda kind, name, key: data.get((kind, name)), {}, {"PATH": "/bin"}
    )
    assert env == {
        "PATH": "/bin",
        "P_X": "cm",
        "ONE": "1",
        "TWO": "12$(THREE)",
        "THREE": "3",
        "NAME": "p-0-abcde",
        "IP": "198.19.1.2",
        "LBL": "x",
        "KEY": "secret",
        "MEM": "1024",
    }


def test_a_missing_required_key_stops_the_container():
    container = {
        "name": "c",
        "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "no", "key": "k"}}}],
    }
    with pytest.raises(EnvError, match="couldn't find key k in ConfigMap no"):
        container_env(container, pod(), lambda *_: None, {}, {})


def test_argv_is_command_then_args_expanded(tmp_path):
    container = {
        "name": "c",
        "image": "i",
        "command": ["sh", "-c"],
        "args": ["echo $(V) $$(V)", "a  b"],
        "env": [{"name": "V", "value": "v"}],
    }
    spec = container_spec(
        container,
        init=False,
        pod=pod(),
        volumes={},
        lookup=lambda *_: None,
        allocatable={},
        base=base_env(None, "h"),
        directory=tmp_path / "c",
        created=tmp_path / "created",
    )
    assert spec["argv"] == ["sh", "-c", "echo v $(V)", "a  b"]
    assert spec["own_pid_namespace"] and spec["cwd"] == "/"
    assert {m[1] for m in spec["mounts"]} == {"/tmp", "/var/tmp", "/root"}


def test_no_command_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="has no command"):
        container_spec(
            {"name": "c", "image": "i"},
            init=False,
            pod=pod(),
            volumes={},
            lookup=lambda *_: None,
            allocatable={},
            base={},
            directory=tmp_path,
            created=tmp_path / "created",
        )


def test_flux_prefix_stands_in_for_the_image(tmp_path):
    env = base_env(tmp_path, "h")
    assert (
        env["PATH"].startswith(f"{tmp_path}/bin:") and env["LD_LIBRARY_PATH"] == f"{tmp_path}/lib"
    )


# --- volumes -------------------------------------------------------------------------------
def test_plan_and_atomic_writer_layout(tmp_path):
    p = pod(
        volumes=[
            {
                "name": "cm",
                "configMap": {
                    "name": "cm",
                    "defaultMode": 0o444,
                    "items": [
                        {"key": "a", "path": "dir/a"},
                        {"key": "b", "path": "b", "mode": 0o500},
                    ],
                },
            },
            {"name": "s", "secret": {"secretName": "s", "defaultMode": 0o400}},
            {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {
                "name": "dw",
                "downwardAPI": {
                    "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                },
            },
            {
                "name": "proj",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}
                                ]
                            }
                        },
                    ]
                },
            },
        ]
    )
    objects = {("ConfigMap", "cm"): {"a": b"A", "b": b"B"}, ("Secret", "s"): {"key": b"K"}}
    asked = []
    volumes = plan(
        p,
        lambda kind, name: objects.get((kind, name)),
        lambda account, aud, seconds: asked.append((account, seconds)) or "jwt",
        {},
    )
    by_name = {v.name: v for v in volumes}
    assert by_name["mem"].tmpfs == "64Mi"
    assert asked == [("default", 600)]
    root = materialize(by_name["cm"], tmp_path / "cm", fs_group=None)
    assert (root / "dir" / "a").read_bytes() == b"A"
    assert os.readlink(root / "dir") == "..data/dir" and os.readlink(root / "..data").startswith(
        ".."
    )
    assert stat.S_IMODE(os.stat(root / "b").st_mode) == 0o500
    secret = materialize(by_name["s"], tmp_path / "s", fs_group=1234)
    info = os.stat(secret / "key")
    assert (stat.S_IMODE(info.st_mode), info.st_gid) == (
        0o440,
        1234,
    )  # SetVolumeOwnership adds group read
    labels = materialize(by_name["dw"], tmp_path / "dw", fs_group=None)
    assert (labels / "labels").read_text() == 'app="x"'
    assert (
        materialize(by_name["proj"], tmp_path / "p", fs_group=None).joinpath("token").read_text()
        == "jwt"
    )


def test_missing_objects_keep_the_pod_waiting():
    p = pod(volumes=[{"name": "cm", "configMap": {"name": "nope"}}])
    with pytest.raises(VolumeError, match='configmap "nope" not found'):
        plan(p, lambda *_: None, lambda *_: "", {})
    optional = pod(volumes=[{"name": "cm", "configMap": {"name": "nope", "optional": True}}])
    assert plan(optional, lambda *_: None, lambda *_: "", {})[0].files == []


def test_host_path_is_the_host_path(tmp_path):
    assert materialize(Volume("h", "hostPath", host_path="/srv"), tmp_path, None) == Path("/srv")


# --- DNS files --------------------------------------------------------------------------------
def test_hosts_and_resolv_conf_as_the_kubelet_writes_them():
    p = pod(
        hostname="demo-0",
        subdomain="demo",
        hostAliases=[{"ip": "1.2.3.4", "hostnames": ["x", "y"]}],
    )
    assert pod_hostname(p, "cluster.local") == ("demo-0", "demo-0.demo.ns.svc.cluster.local")
    hosts = hosts_file(p, "198.19.1.2", "cluster.local")
    assert "198.19.1.2\tdemo-0.demo.ns.svc.cluster.local\tdemo-0\n" in hosts
    assert "1.2.3.4\tx\ty" in hosts
    assert resolv_conf(p, "198.19.0.1", "cluster.local") == (
        "search ns.svc.cluster.local svc.cluster.local cluster.local\n"
        "nameserver 198.19.0.1\noptions ndots:5\n"
    )
    custom = pod(
        dnsPolicy="None",
        dnsConfig={"nameservers": ["9.9.9.9"], "options": [{"name": "ndots", "value": "2"}]},
    )
    assert (
        resolv_conf(custom, "198.19.0.1", "cluster.local")
        == "nameserver 9.9.9.9\noptions ndots:2\n"
    )


def test_a_claim_is_its_bound_volumes_path_and_waits_until_bound():
    p = pod(
        volumes=[{"name": "lus", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}}]
    )
    (volume,) = plan(p, lambda *_: None, lambda *_: "", {}, lambda claim: f"/lus/{claim}")
    assert (volume.kind, volume.host_path, volume.read_only) == ("hostPath", "/lus/c", True)

    def unbound(claim: str) -> str:
        raise VolumeError(f"persistentvolumeclaim {claim!r} is not bound yet")

    with pytest.raises(VolumeError, match="not bound yet"):
        plan(p, lambda *_: None, lambda *_: "", {}, unbound)


def test_a_pods_address_is_not_given_again_at_once(monkeypatch, tmp_path):
    """As host-local IPAM: the next pod gets the next free address, so a pod
    made again (rank 0 replaced) does not take the address its peers still
    hold the old pod's MAC for; addresses wrap around when the end is reached."""
    monkeypatch.setattr(network, "_ip", lambda *args, **kwargs: "")
    monkeypatch.setattr(network.shutil, "rmtree", lambda *args, **kwargs: None)
    node = NodeNetwork(0)
    first, ip = node.create()
    assert ip == f"198.19.1.{first}"
    node.destroy(first)
    again, _ = node.create()
    assert again != first
    node.last = 254  # at the end: back to the first free one
    assert node.create()[0] == first
