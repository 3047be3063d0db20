"""spec.leadState in the objects: the claim fluxhop makes (or the user's),
named for the policy that mounts it in rank 0's pod, or an emptyDir in every
pod; rank 0's statedir on it, the KVS checkpoint period,
and a pod stopped by SIGTERM replaced rather than failing the Job; and the
inputs refused in one line. tests/realk8s/test_lead_state.py loses rank 0 on
the real cluster."""

from __future__ import annotations

import json

import pytest
import yaml

from fluxhop.errors import SpecError
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.pod import (
    LEAD_CLAIM_ANNOTATION,
    LEAD_CONTAINER_ANNOTATION,
    LEAD_STATE_POLICY,
    LEAD_STATE_VOLUME,
)
from fluxhop.spec import MiniCluster
from fluxhop.spec.leadstate import LEAD_STATE_DIR
from fluxhop.workload.marks import COMPLETION_INDEX
from tests.conformance import REPO
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


def pod_and_job(objects, target="job"):
    workload = objects[-1]
    job = (
        workload["spec"]
        if target == "job"
        else workload["spec"]["replicatedJobs"][0]["template"]["spec"]
    )
    return job["template"], job


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_fluxhop_makes_a_claim_for_rank_0s_pod_alone(target):
    objects = render(spec({"storageClassName": "nfs", "size": "2Gi"}), target, cert=CERT)
    for obj in objects:
        validate(obj)
    claim = kinds(objects)["PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "kept-lead-state"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "nfs",
    }
    template, job = pod_and_job(objects, target)
    pod = template["spec"]
    # no pod of the template mounts it: the policy adds it to rank 0's, named here
    assert LEAD_STATE_VOLUME not in {v["name"] for v in pod["volumes"]}
    assert LEAD_STATE_DIR not in {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert template["metadata"]["annotations"] == {
        LEAD_CLAIM_ANNOTATION: "kept-lead-state",
        LEAD_CONTAINER_ANNOTATION: "kept",
    }
    assert pod["containers"][0]["name"] == "kept"  # the policy's container, the rule's too
    # deleted, a pod exits 143 (the entrypoint's SIGTERM status): replaced, not a failed Job
    rules = job["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "onExitCodes": {"containerName": "kept", "operator": "In",
                                                "values": [143]}} in rules  # fmt: skip
    data = kinds(objects)["ConfigMap"]["data"]
    assert f"lead_state_dir={LEAD_STATE_DIR}" in data["entrypoint.sh"]
    assert "lead_state_claim=kept-lead-state" in data["entrypoint.sh"]
    assert '[kvs]\ncheckpoint-period = "1s"' in data["broker.toml"]


def test_a_claim_of_the_users_is_named_and_none_is_made():
    objects = render(spec({"claimName": "team-state", "checkpointSeconds": 5}), cert=CERT)
    assert "PersistentVolumeClaim" not in kinds(objects)
    template, _ = pod_and_job(objects)
    assert template["metadata"]["annotations"][LEAD_CLAIM_ANNOTATION] == "team-state"
    assert 'checkpoint-period = "5s"' in kinds(objects)["ConfigMap"]["data"]["broker.toml"]


def test_an_empty_dir_is_every_pods_own_and_its_loss_ends_the_job():
    objects = render(spec({"emptyDir": True}), cert=CERT)
    for obj in objects:
        validate(obj)
    assert "PersistentVolumeClaim" not in kinds(objects)
    template, job = pod_and_job(objects)
    assert "annotations" not in template["metadata"]
    assert {"name": LEAD_STATE_VOLUME, "emptyDir": {}} in template["spec"]["volumes"]
    mounts = template["spec"]["containers"][0]["volumeMounts"]
    assert {"name": LEAD_STATE_VOLUME, "mountPath": LEAD_STATE_DIR} in mounts
    assert len(job["podFailurePolicy"]["rules"]) == 1  # a new pod would have no state
    data = kinds(objects)["ConfigMap"]["data"]
    assert f"lead_state_dir={LEAD_STATE_DIR}" in data["entrypoint.sh"]
    assert "lead_state_claim=''" in data["entrypoint.sh"]


def test_the_policy_reads_what_the_template_names():
    """deploy/lead-state.yaml, which an admin applies, is admissible and agrees with
    render/pod.py (tests/realk8s/test_lead_state.py runs it on the API server)."""
    policy, binding = yaml.safe_load_all((REPO / "deploy" / "lead-state.yaml").read_text())
    validate(policy)
    validate(binding)
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == LEAD_STATE_POLICY
    text = json.dumps(policy["spec"])
    for name in (LEAD_CLAIM_ANNOTATION, LEAD_CONTAINER_ANNOTATION, LEAD_STATE_VOLUME,
                 LEAD_STATE_DIR, COMPLETION_INDEX):  # fmt: skip
        assert name in text
    labels = policy["spec"]["matchConstraints"]["objectSelector"]["matchLabels"]
    template, _ = pod_and_job(render(spec({}), cert=CERT))
    assert labels.items() <= template["metadata"]["labels"].items()


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
        ({"emptyDir": True, "claimName": "c"}, True, "emptyDir keeps the state in the pod"),
    ],
)
def test_bad_input_is_one_line(lead_state, interactive, said):
    with pytest.raises(SpecError) as caught:
        spec(lead_state, interactive=interactive)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)
