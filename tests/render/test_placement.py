"""Placement lands where Kubernetes (and Kueue) read it, on every target."""

from __future__ import annotations

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.render import render
from fluxhop.spec import MiniCluster
from fluxhop.spec.placement import Placement, place
from tests.documents import minicluster_doc
from tests.pss import pod_specs
from tests.render.test_render import CERT, by_kind, spec_of
from tests.schemas import validate

POD_TARGETS = ("job", "jobset")
QUEUE = "kueue.x-k8s.io/queue-name"


def placed(placement: Placement, **spec) -> MiniCluster:
    document = spec_of(**spec).model_dump(by_alias=True, exclude_none=True)
    return MiniCluster.from_dict(place(document, placement))


def template_of(objects):
    ((_, template),) = pod_specs(objects)
    return template


def workload(objects):
    kinds = by_kind(objects)
    return kinds.get("Job") or kinds["JobSet"]


@pytest.mark.parametrize("target", POD_TARGETS)
def test_every_flag_lands_in_the_pod_spec(target):
    spec = placed(
        Placement(
            priority_class="hpc-high",
            node_selector=("cloud.google.com/gke-nodepool=hpc",),
            tolerations=("nvidia.com/gpu:NoSchedule", "dedicated=flux:NoExecute"),
            memory="16Gi",
            cpu="7500m",
            service_account="runner",
            image_pull_secret="regcred",
            pull_policy="Always",
        )
    )
    objects = render(spec, target, cert=CERT)
    for obj in objects:
        validate(obj)
    pod = template_of(objects)["spec"]
    assert pod["priorityClassName"] == "hpc-high"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "hpc"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "flux", "effect": "NoExecute"},
    ]
    assert pod["serviceAccountName"] == "runner"
    assert pod["automountServiceAccountToken"] is False  # a name is not a reason for a token
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    lead = pod["containers"][0]
    assert lead["imagePullPolicy"] == "Always"
    assert lead["resources"] == {
        "limits": {"memory": "16Gi"},
        "requests": {"memory": "16Gi", "cpu": "7500m"},
    }


def test_cpu_overrides_what_cores_per_task_implies_and_r_follows():
    from fluxhop.spec.flags import minicluster_from_flags

    spec = minicluster_from_flags(
        ["hostname"], image="ubuntu:noble", nodes=2, tasks=4, cores_per_task=2, name="demo"
    )
    assert spec.spec.flux_container.resources.requests["cpu"] == "4"
    document = place(spec.model_dump(by_alias=True, exclude_none=True), Placement(cpu="6"))
    cores = MiniCluster.from_dict(document).spec.flux_container.resources.cpu()
    assert cores == 6


@pytest.mark.parametrize("target", POD_TARGETS)
def test_pods_per_node(target):
    one = template_of(render(placed(Placement(pods_per_node=1)), target, cert=CERT))["spec"]
    anti = one["affinity"]["podAntiAffinity"]
    assert anti == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"fluxhop.io/minicluster": "demo"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
    assert "topologySpreadConstraints" not in one
    four = template_of(render(placed(Placement(pods_per_node=4)), target, cert=CERT))["spec"]
    assert "podAntiAffinity" not in four["affinity"]
    assert four["topologySpreadConstraints"] == [
        {
            "maxSkew": 4,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"fluxhop.io/minicluster": "demo"}},
        }
    ]
    default = template_of(render(spec_of(), target, cert=CERT))["spec"]["affinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in default["podAntiAffinity"]


@pytest.mark.parametrize("target", POD_TARGETS)
def test_topology_without_a_queue_is_pod_affinity(target):
    for given, rule in (
        (
            "required:cloud.google.com/gke-nodepool",
            "requiredDuringSchedulingIgnoredDuringExecution",
        ),
        ("cloud.google.com/gke-nodepool", "preferredDuringSchedulingIgnoredDuringExecution"),
    ):
        objects = render(placed(Placement(topology=given)), target, cert=CERT)
        affinity = template_of(objects)["spec"]["affinity"]["podAffinity"]
        assert list(affinity) == [rule]
        assert "cloud.google.com/gke-nodepool" in str(affinity[rule])
        assert "topology.kubernetes.io/zone" not in str(affinity)


@pytest.mark.parametrize("target", POD_TARGETS)
def test_queue_goes_on_the_workload_suspended_and_nowhere_else(target):
    spec = placed(Placement(queue="team-a", topology="required:cloud.google.com/gke-nodepool"))
    objects = render(spec, target, cert=CERT)
    for obj in objects:
        validate(obj)
    root = workload(objects)
    assert root["metadata"]["labels"][QUEUE] == "team-a"
    assert root["spec"]["suspend"] is True
    others = [o for o in objects if o is not root]
    assert others and all(QUEUE not in o["metadata"]["labels"] for o in others)
    template = template_of(objects)
    assert (
        QUEUE not in template["metadata"]["labels"]
    )  # Kueue's pod integration would take each pod
    # Kueue's topology-aware scheduling reads the annotation; no affinity of our own
    annotations = template["metadata"]["annotations"]
    assert annotations == {
        "kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gke-nodepool"
    }
    assert "podAffinity" not in template["spec"]["affinity"]
    if target == "jobset":  # the JobSet is what Kueue suspends; its Job is not
        assert "suspend" not in root["spec"]["replicatedJobs"][0]["template"]["spec"]


@pytest.mark.parametrize("target", POD_TARGETS)
def test_kueue_sees_every_broker_as_one_pod_set_with_its_requests(target):
    """Kueue's Workload for a Job is one pod set of `parallelism` pods (for a
    JobSet: replicas x parallelism) with the pod's requests: every broker is
    admitted at once, and the quota sees what the pods ask for."""
    spec = placed(Placement(queue="team-a", memory="8Gi", cpu="4"), size=6)
    root = workload(render(spec, target, cert=CERT))
    if target == "job":
        count, template = root["spec"]["parallelism"], root["spec"]["template"]
        assert root["spec"]["completions"] == count
    else:
        (job,) = root["spec"]["replicatedJobs"]
        count = job["replicas"] * job["template"]["spec"]["parallelism"]
        template = job["template"]["spec"]["template"]
    assert count == 6
    requests: dict[str, str] = {}
    for container in template["spec"]["containers"]:
        requests |= container.get("resources", {}).get("requests", {})
    assert requests == {"memory": "8Gi", "cpu": "4"}


def test_unqueued_workloads_are_not_suspended():
    for target in POD_TARGETS:
        assert "suspend" not in workload(render(spec_of(), target, cert=CERT))["spec"]


def test_queue_label_from_a_file_or_job_labels_means_the_same():
    by_flag = render(placed(Placement(queue="q")), "job", cert=CERT)
    by_labels = render(spec_of(jobLabels={QUEUE: "q"}), "job", cert=CERT)
    assert workload(by_flag) == workload(by_labels)


def test_the_operator_target_says_what_it_cannot_carry():
    spec = placed(
        Placement(
            queue="team-a", priority_class="high", pods_per_node=1, tolerations=("a:NoSchedule",)
        )
    )
    with pytest.warns(FluxhopWarning) as caught:
        (cr,) = [o for o in render(spec, "minicluster", cert=CERT) if o["kind"] == "MiniCluster"]
    said = " ".join(str(w.message) for w in caught)
    assert "queue" not in said  # carried: the Flux Operator labels its Job with spec.jobLabels
    assert "spec.pod.priorityClassName is not copied" in said
    assert "spec.pod.podsPerNode is not copied" in said
    validate(cr)
    assert cr["spec"]["pod"]["tolerations"] == [
        {"key": "a", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert QUEUE not in cr["metadata"]["labels"]
    assert cr["spec"]["jobLabels"] == {QUEUE: "team-a"}


def test_the_operator_target_keeps_job_labels_beside_the_queue():
    document = minicluster_doc("demo", "team", jobLabels={"team": "hpc"},
                               containers=[{"image": "ubuntu:noble", "command": "hostname"}])  # fmt: skip
    document["metadata"]["labels"] = {QUEUE: "q"}
    spec = MiniCluster.from_dict(document)
    (cr,) = [o for o in render(spec, "minicluster", cert=CERT) if o["kind"] == "MiniCluster"]
    assert cr["spec"]["jobLabels"] == {"team": "hpc", QUEUE: "q"}


def test_toleration_seconds_is_kept_for_pods_but_not_sent_to_the_flux_operator():
    spec = spec_of(
        pod={"tolerations": [{"key": "spot", "operator": "Exists", "tolerationSeconds": 60}]}
    )
    assert (
        template_of(render(spec, "job", cert=CERT))["spec"]["tolerations"][0]["tolerationSeconds"]
        == 60
    )
    with pytest.warns(FluxhopWarning, match="tolerationSeconds is not copied"):
        cr = next(o for o in render(spec, "minicluster", cert=CERT) if o["kind"] == "MiniCluster")
    validate(cr)  # the CRD has no tolerationSeconds: the API server would refuse it
    assert cr["spec"]["pod"]["tolerations"] == [{"key": "spot", "operator": "Exists"}]
