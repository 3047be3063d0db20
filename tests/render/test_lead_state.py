"""spec.leadState in the objects: the claim fluxhop makes (or the user's),
its volume in the pods, rank 0's statedir on it, the KVS checkpoint period,
and a pod stopped by SIGTERM replaced rather than failing the Job; and the
inputs refused in one line. tests/realk8s/test_lead_state.py loses rank 0 on
the real cluster."""

from __future__ import annotations

import pytest

from fluxhop.errors import SpecError
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.scripts import LEAD_STATE_DIR
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.schemas import validate

CERT = CurveCert.generate("lead")


def spec(lead_state=None, *, interactive: bool = True) -> MiniCluster:
    doc = minicluster_doc("kept", size=3, containers=[{"image": "ubuntu:noble"}])
    doc["spec"]["interactive"] = interactive
    if lead_state is not None:
        doc["spec"]["leadState"] = lead_state
    return MiniCluster.from_dict(doc)


def kinds(objects):
    return {o["kind"]: o for o in objects}


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_fluxhop_makes_a_claim_every_pod_mounts(target):
    objects = render(spec({"storageClassName": "nfs", "size": "2Gi"}), target, cert=CERT)
    for obj in objects:
        validate(obj)
    claim = kinds(objects)["PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "kept-lead-state"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "nfs",
    }
    workload = objects[-1]
    job = (
        workload["spec"]
        if target == "job"
        else workload["spec"]["replicatedJobs"][0]["template"]["spec"]
    )
    pod = job["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"] == {"claimName": "kept-lead-state"}
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": volume["name"], "mountPath": LEAD_STATE_DIR} in mounts
    # deleted, a pod exits 143 (the entrypoint's SIGTERM status): replaced, not a failed Job
    assert pod["containers"][0]["name"] == "kept"  # the rule's containerName
    rules = job["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "onExitCodes": {"containerName": "kept", "operator": "In",
                                                "values": [143]}} in rules  # fmt: skip
    data = kinds(objects)["ConfigMap"]["data"]
    assert f"lead_state_dir={LEAD_STATE_DIR}" in data["entrypoint.sh"]
    assert '[kvs]\ncheckpoint-period = "1s"' in data["broker.toml"]


def test_a_claim_of_the_users_is_mounted_and_none_is_made():
    objects = render(spec({"claimName": "team-state", "checkpointSeconds": 5}), cert=CERT)
    assert "PersistentVolumeClaim" not in kinds(objects)
    pod = kinds(objects)["Job"]["spec"]["template"]["spec"]
    assert {
        "name": "fluxhop-lead-state",
        "persistentVolumeClaim": {"claimName": "team-state"},
    } in pod["volumes"]
    assert 'checkpoint-period = "5s"' in kinds(objects)["ConfigMap"]["data"]["broker.toml"]


def test_without_it_nothing_changes():
    objects = render(spec(), cert=CERT)
    job = kinds(objects)["Job"]["spec"]
    assert "PersistentVolumeClaim" not in kinds(objects)
    assert len(job["podFailurePolicy"]["rules"]) == 1  # a pod deleted still fails the Job
    data = kinds(objects)["ConfigMap"]["data"]
    assert "lead_state_dir=''" in data["entrypoint.sh"]
    assert "[kvs]" not in data["broker.toml"]


@pytest.mark.parametrize(
    ("lead_state", "interactive", "said"),
    [
        ({}, False, "leadState keeps an interactive MiniCluster's queue"),
        ({"size": "0"}, True, "leadState.size: is 0; give the claim's size"),
        ({"size": "lots"}, True, "is not a Kubernetes quantity"),
        ({"checkpointSeconds": 0}, True, "checkpointSeconds"),
        ({"claimName": "Not_A_Name"}, True, "claimName"),
    ],
)
def test_bad_input_is_one_line(lead_state, interactive, said):
    with pytest.raises(SpecError) as caught:
        spec(lead_state, interactive=interactive)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)
