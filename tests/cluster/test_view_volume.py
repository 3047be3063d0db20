"""flux.container.volume auto, decided against the cluster's nodes
(fluxhop.cluster.view_volume): the view image mounted where every node the
pods may land on can mount an image volume, copied elsewhere with one
warning that says why; a create again keeps what the MiniCluster has."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.cluster.view_volume import node_problem, resolved_view_volume, tolerated
from fluxhop.errors import FluxhopWarning
from fluxhop.render.targets import Target
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.placement import Placement
from fluxhop.spec.pod import Toleration

GOOD = ("v1.36.3", "containerd://2.4.2")


def node(name: str, kubelet: str, runtime: str, **spec) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": spec, "status": {"nodeInfo": {"kubeletVersion": kubelet,
                                                  "containerRuntimeVersion": runtime}}}  # fmt: skip


@pytest.mark.parametrize(
    ("kubelet", "runtime", "problem"),
    [
        ("v1.36.3", "containerd://2.4.2", None),
        ("v1.35.0", "containerd://2.2.0", None),
        ("v1.36.3", "cri-o://1.33.1", None),
        # they mount image volumes but ignore subPath: the whole image where the view goes
        ("v1.36.3", "containerd://2.1.4", "node n runs containerd 2.1.4, which mounts no image"),
        ("v1.36.3", "cri-o://1.32.3", "node n runs cri-o 1.32.3, which mounts no image"),
        ("v1.34.5", "containerd://2.4.2", "node n's kubelet is v1.34.5, before 1.35"),
        ("v1.36.3", "containerd://1.7.27", "node n runs containerd 1.7.27, which mounts no image"),
        ("v1.36.3", "cri-o://1.30.4", "node n runs cri-o 1.30.4, which mounts no image"),
        ("v1.36.3", "docker://28.0.1", "node n runs docker 28.0.1, which mounts no image"),
        ("", "", "node n's kubelet is of no known version, before 1.35"),
    ],
)
def test_a_node_says_whether_it_mounts_an_image_volume(kubelet, runtime, problem):
    said = node_problem(node("n", kubelet, runtime))
    assert said == problem if problem is None else said.startswith(problem), said


@pytest.mark.parametrize(
    ("taint", "tolerations", "expected"),
    [
        ({"key": "a", "value": "1", "effect": "NoSchedule"}, [], False),
        ({"key": "a", "value": "1", "effect": "NoSchedule"}, [Toleration(key="a", operator="Exists")], True),
        ({"key": "a", "value": "1", "effect": "NoSchedule"}, [Toleration(key="a", value="1")], True),
        ({"key": "a", "value": "1", "effect": "NoSchedule"}, [Toleration(key="a", value="2")], False),
        ({"key": "a", "value": "1", "effect": "NoSchedule"}, [Toleration(operator="Exists")], True),
        ({"key": "a", "effect": "NoExecute"}, [Toleration(key="a", operator="Exists", effect="NoSchedule")], False),
    ],
)  # fmt: skip
def test_tolerations_match_taints_as_kubernetes_matches_them(taint, tolerations, expected):
    assert tolerated(taint, tolerations) is expected


def created(fake, ops, **flags):
    """The volumes of the Job a create made, and the warnings it gave."""
    spec = minicluster_from_flags(["hostname"], image="ubuntu", name="demo", **flags)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ops.create(spec)
    job = fake.get("Job", "demo")
    pod = job["spec"]["template"]["spec"]
    said = [str(w.message) for w in caught if issubclass(w.category, FluxhopWarning)]
    return pod, said


def test_where_every_node_can_the_view_is_mounted_silently(fake, ops):
    fake.seed("Node", node("new-1", *GOOD))
    fake.seed("Node", node("old", "v1.30.0", "containerd://1.7.0", unschedulable=True))
    fake.seed("Node", node("tainted", "v1.30.0", "containerd://1.7.0",
                           taints=[{"key": "gpu", "effect": "NoSchedule"}]))  # fmt: skip
    pod, said = created(fake, ops)
    assert "initContainers" not in pod and said == []
    assert any(v.get("image") for v in pod["volumes"])


def test_a_node_that_cannot_gets_the_copy_and_one_warning_naming_it(fake, ops):
    fake.seed("Node", node("new-1", *GOOD))
    fake.seed("Node", node("old", "v1.36.3", "containerd://1.7.27"))
    pod, said = created(fake, ops)
    assert [c["name"] for c in pod["initContainers"]] == ["flux-view"]
    assert not any(v.get("image") for v in pod["volumes"])
    assert len(said) == 1 and said[0].startswith(
        "spec.flux.container.volume auto: the Flux view is copied into each pod, not mounted "
        "from its image: node old runs containerd 1.7.27"
    ), said


def test_an_explicit_choice_is_kept_whatever_the_nodes(fake, ops):
    fake.seed("Node", node("old", "v1.36.3", "containerd://1.7.27"))
    pod, said = created(fake, ops, placement=Placement(view_volume="image"))
    assert "initContainers" not in pod and said == []


def test_a_create_again_keeps_what_the_minicluster_has(fake, ops):
    fake.seed("Node", node("old", "v1.36.3", "containerd://1.7.27"))
    created(fake, ops)  # copied
    fake.seed("Node", node("old", *GOOD))  # the node upgraded since
    pod, said = created(fake, ops)  # unchanged: no conflict, still copied
    assert [c["name"] for c in pod["initContainers"]] == ["flux-view"] and said == []


def test_a_queued_minicluster_asks_every_schedulable_node(fake, ops):
    """Kueue's flavor adds tolerations at admission: a tainted node the
    spec does not tolerate may still get its pods."""
    fake.seed("Node", node("new-1", *GOOD))
    fake.seed("Node", node("tainted", "v1.36.3", "containerd://1.7.27",
                           taints=[{"key": "pool", "effect": "NoSchedule"}]))  # fmt: skip
    spec = minicluster_from_flags(["hostname"], image="ubuntu", name="demo",
                                  placement=Placement(queue="q"))  # fmt: skip
    decided = resolved_view_volume(ops.kube, spec, Target.JOB, existing=None, nodes=lambda: [
        fake.get("Node", "new-1"), fake.get("Node", "tainted")])  # fmt: skip
    assert decided.spec.flux.container.volume == "copy"


def test_a_minicluster_sent_to_other_clusters_is_copied(ops):
    """MultiKueue copies its Job to a worker whose nodes are not known here."""
    spec = minicluster_from_flags(["hostname"], image="ubuntu", name="demo")
    spec.spec.managed_by = "kueue.x-k8s.io/multikueue"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decided = resolved_view_volume(ops.kube, spec, Target.JOB, existing=None, nodes=list)
    assert decided.spec.flux.container.volume == "copy"
    assert "dispatched to other clusters" in str(caught[0].message)
