"""Kueue's decisions read, and the job controller's side of its contract
(workload/kueue_admission.py): what an admission adds to the pods, how they
are put back, and the status patches that release or finish a Workload."""

from __future__ import annotations

import pytest

from fluxhop.workload.kueue_admission import (
    decision,
    finished_status,
    pod_set_info,
    released_status,
    restored,
    started,
    template_patch,
)

NOW = "2026-12-05T12:00:00Z"
GPU = {"spec": {"nodeLabels": {"pool": "gpu"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}  # fmt: skip


def workload(*conditions: dict, admission: dict | None = None, checks: list | None = None) -> dict:
    status: dict = {"conditions": [{"lastTransitionTime": "2026-01-01T00:00:00Z", "message": "",
                                    **c} for c in conditions]}  # fmt: skip
    if admission is not None:
        status["admission"] = admission
    if checks is not None:
        status["admissionChecks"] = checks
    return {"metadata": {"name": "w", "resourceVersion": "7", "generation": 2},
            "spec": {"podSets": [{"name": "brokers", "count": 2}]}, "status": status}  # fmt: skip


ADMITTED = workload(
    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
    {"type": "Admitted", "status": "True", "reason": "Admitted"},
    admission={"clusterQueue": "cq", "podSetAssignments": [
        {"name": "brokers", "flavors": {"cpu": "gpus", "memory": "gpus"}, "count": 2}]},
)  # fmt: skip


def test_decisions_in_kueues_words():
    assert decision(ADMITTED).admitted and decision(ADMITTED).quota_reserved
    waiting = decision(workload({"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                 "message": "insufficient quota for cpu"}))  # fmt: skip
    assert (waiting.admitted, waiting.waiting) == (False, "insufficient quota for cpu")
    evicted = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by x"}
    assert decision({**ADMITTED, "status": {**ADMITTED["status"], "conditions": [
        *ADMITTED["status"]["conditions"], evicted]}}).evicted == ("Preempted", "by x")  # fmt: skip
    assert decision({**ADMITTED, "spec": {"active": False}}).active is False


def test_the_flavors_nodes_and_tolerations_and_the_checks_updates():
    checks = [{"name": "prov", "state": "Ready",
               "podSetUpdates": [{"name": "brokers", "labels": {"a": "1"}, "nodeSelector": {"z": "1"}}]}]  # fmt: skip
    info = pod_set_info({**ADMITTED, "status": {**ADMITTED["status"], "admissionChecks": checks}},
                        {"gpus": GPU})  # fmt: skip
    assert info.node_selector == {"pool": "gpu", "z": "1"}
    assert info.tolerations == GPU["spec"]["tolerations"]  # one flavor named twice: once
    assert info.labels == {"kueue.x-k8s.io/podset": "brokers", "a": "1"}


def test_a_check_that_contradicts_the_flavor_is_refused():
    checks = [{"name": "prov", "state": "Ready",
               "podSetUpdates": [{"name": "brokers", "nodeSelector": {"pool": "cpu"}}]}]  # fmt: skip
    with pytest.raises(ValueError, match="admission check prov sets nodeSelector pool to 'cpu'"):
        pod_set_info({**ADMITTED, "status": {**ADMITTED["status"], "admissionChecks": checks}},
                     {"gpus": GPU})  # fmt: skip


def test_started_then_restored_is_the_template_again_with_the_servers_labels():
    made = {"metadata": {"labels": {"app": "x"}},
            "spec": {"nodeSelector": {"mine": "1"}, "containers": []}}  # fmt: skip
    on_server = {**made, "metadata": {"labels": {"app": "x", "batch.kubernetes.io/job-name": "j"}}}
    info = pod_set_info(ADMITTED, {"gpus": GPU})
    running = started(on_server, info)
    assert running["spec"]["nodeSelector"] == {"mine": "1", "pool": "gpu"}
    back = restored(running, made)
    assert back["spec"] == made["spec"]
    assert back["metadata"]["labels"] == {"app": "x", "batch.kubernetes.io/job-name": "j"}


def test_a_merge_patch_nulls_what_goes_and_replaces_lists_whole():
    before = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"t": [1, 2], "same": 1}}
    after = {"metadata": {"labels": {"a": "1"}}, "spec": {"t": [1], "same": 1, "new": {"x": 1}}}
    assert template_patch(before, after) == {
        "metadata": {"labels": {"b": None}}, "spec": {"t": [1], "new": {"x": 1}}}  # fmt: skip
    assert template_patch(after, after) == {}


def test_released_gives_back_the_quota_and_queues_a_preempted_one_again():
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "Preempted",
        "message": "by x",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    patch = released_status({**ADMITTED, "status": {**ADMITTED["status"], "conditions": [
        *ADMITTED["status"]["conditions"], evicted]}}, NOW)  # fmt: skip
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert patch["status"]["admission"] is None
    said = {c["type"]: c for c in patch["status"]["conditions"]}
    assert (said["QuotaReserved"]["status"], said["QuotaReserved"]["message"]) == ("False", "by x")
    assert said["QuotaReserved"]["lastTransitionTime"] == NOW
    assert (said["Admitted"]["status"], said["Requeued"]["status"]) == ("False", "True")
    assert said["Evicted"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # unchanged: kept
    assert all(c["observedGeneration"] == 2 for c in said.values() if c["type"] != "Evicted")


def test_finished_says_how():
    patch = finished_status(ADMITTED, NOW, succeeded=False, message="rank 0 exited with code 3")
    (finished,) = [c for c in patch["status"]["conditions"] if c["type"] == "Finished"]
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "Failed", "rank 0 exited with code 3")  # fmt: skip


def test_an_admission_against_the_pods_own_node_selector_is_refused():
    made = {"metadata": {}, "spec": {"nodeSelector": {"pool": "cpu"}, "containers": []}}
    with pytest.raises(ValueError, match="sets nodeSelector pool to 'gpu', the pods ask for 'cpu'"):
        started(made, pod_set_info(ADMITTED, {"gpus": GPU}))


def placed(request: dict | None) -> dict:
    """ADMITTED with a topology assignment (Kueue's TAS), its pod set asking ``request``."""
    assignment = {**ADMITTED["status"]["admission"]["podSetAssignments"][0],
                  "topologyAssignment": {"levels": ["zone"], "slices": []}}  # fmt: skip
    pod_set = {"name": "brokers", "count": 2, **({"topologyRequest": request} if request else {})}
    return {**ADMITTED, "spec": {"podSets": [pod_set]},
            "status": {**ADMITTED["status"], "admission": {
                "clusterQueue": "cq", "podSetAssignments": [assignment]}}}  # fmt: skip


def test_a_topology_assignment_gates_the_pods_for_kueues_ungater():
    made = {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "zone"}},
            "spec": {"containers": []}}  # fmt: skip
    info = pod_set_info(placed({"required": "zone", "podIndexLabel": "i"}), {"gpus": GPU})
    running = started(made, info)
    assert running["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert running["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "zone",
        "kueue.x-k8s.io/workload": "w",  # how the ungater finds them
    }
    back = restored(running, made)
    assert back == made  # evicted: no gate, no annotation of the admission's


def test_an_assignment_without_a_request_is_unconstrained():
    info = pod_set_info(placed({"podIndexLabel": "i"}), {"gpus": GPU})
    assert info.annotations["kueue.x-k8s.io/podset-unconstrained-topology"] == "true"
    assert "kueue.x-k8s.io/podset-unconstrained-topology" not in pod_set_info(
        placed({"preferred": "zone"}), {"gpus": GPU}).annotations  # fmt: skip
    assert pod_set_info(ADMITTED, {"gpus": GPU}).scheduling_gates == []  # no topology: no gate
