"""deploy/: the kustomize base builds into objects a real API server admits,
the CRD keeps the Flux Operator's spec, the operator's pod passes the Pod
Security Standards "restricted" level, and the ClusterRole allows exactly
what the operator does - the fake API server enforces it."""

from __future__ import annotations

import copy
import shutil
import subprocess

import pytest
import yaml

from fluxhop.errors import Forbidden
from fluxhop.operator.reconcile import Reconciler
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.fixtures import seed_lead_state_policy, seed_storage_class
from tests.conformance import CONFORMANCE, REPO
from tests.operator.test_reconcile import conditions, resource, settle
from tests.pss import violations
from tests.schemas import validate

DEPLOY = REPO / "deploy"
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ClusterKopfPeering",
}


def build() -> list[dict]:
    """kubectl kustomize deploy/ where kubectl is, else the same in Python
    (this base only lists resources and sets the namespace)."""
    kubectl = shutil.which("kubectl")
    if kubectl:
        out = subprocess.run(
            [kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True
        ).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    objects = []
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            if not doc:
                continue
            if doc["kind"] not in CLUSTER_SCOPED:
                doc["metadata"]["namespace"] = kustomization["namespace"]
            objects.append(doc)
    return objects


def by_kind(objects):
    found: dict[str, list[dict]] = {}
    for obj in objects:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def test_the_base_builds_into_admissible_objects():
    objects = build()
    kinds = by_kind(objects)
    assert {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    } <= set(kinds)
    assert "ClusterKopfPeering" not in kinds  # the operator makes it: see operator/peering.py
    for obj in objects:
        validate(obj)
    (binding,) = kinds["ClusterRoleBinding"]
    (account,) = kinds["ServiceAccount"]
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]
    assert binding["subjects"][0]["namespace"] == account["metadata"]["namespace"]


def test_the_crd_keeps_the_flux_operators_spec_and_subresources():
    theirs = yaml.safe_load(
        (CONFORMANCE / "crds" / "flux-framework.org_miniclusters.yaml").read_text()
    )
    ours = yaml.safe_load((DEPLOY / "crd.yaml").read_text())
    (t,) = [v for v in theirs["spec"]["versions"] if v["name"] == "v1alpha2"]
    (o,) = [v for v in ours["spec"]["versions"] if v["name"] == "v1alpha2"]
    spec = lambda v: v["schema"]["openAPIV3Schema"]["properties"]["spec"]  # noqa: E731
    status = lambda v: v["schema"]["openAPIV3Schema"]["properties"]["status"]  # noqa: E731
    added = {
        "metrics",
        "autoscale",
        "health",
        "leadState",
        "managedBy",
        "suspend",
    }  # fluxhop's extensions, and only those
    assert set(spec(o)["properties"]) - set(spec(t)["properties"]) == added
    # and one field within: how the view reaches the pods
    view = copy.deepcopy(spec(o)["properties"]["flux"]["properties"]["container"])
    assert view["properties"].pop("volume")["enum"] == ["auto", "image", "copy"]
    assert view == spec(t)["properties"]["flux"]["properties"]["container"]
    ours_only = {"properties", "x-kubernetes-validations"}  # managedBy's immutability
    kept = {k: v for k, v in spec(o)["properties"].items() if k not in added}
    kept["flux"] = copy.deepcopy(kept["flux"])
    kept["flux"]["properties"]["container"] = view
    assert {**{k: v for k, v in spec(o).items() if k not in ours_only},
            "properties": kept} == spec(t)  # fmt: skip
    assert [r["message"] for r in spec(o)["x-kubernetes-validations"]] == [
        "spec.managedBy is immutable"
    ]
    # every MiniCluster YAML means the same
    assert o["subresources"] == t["subresources"]  # status, and scale (spec.size <-> status.size)
    assert set(status(t)["properties"]) <= set(status(o)["properties"])
    for key, value in status(t)["properties"].items():
        assert status(o)["properties"][key] == value
    assert ours["metadata"]["name"] == theirs["metadata"]["name"]


def test_the_operator_pod_is_restricted_and_probed():
    (deployment,) = by_kind(build())["Deployment"]
    template = deployment["spec"]["template"]
    assert violations(template, "restricted") == []
    (container,) = template["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert container["args"][0] == "operator"


def rules() -> list[dict]:
    (role,) = by_kind(build())["ClusterRole"]
    return role["rules"]


@pytest.fixture
def fake():
    server = FakeAPIServer()
    server.flux_operator = False
    server.rbac = rules()
    yield server
    server.close()


def test_everything_the_operator_does_is_allowed_by_its_role(fake, kube, ops):
    fake.rbac = None
    seed_lead_state_policy(fake)  # so that it chooses a claim of the default class
    seed_storage_class(fake, "disk", default=True)
    kube.apply(resource(size=2, maxSize=3))  # the user applies it, with the user's rights
    fake.rbac = rules()
    reconciler = Reconciler(ops)
    reconciler.reconcile(fake.get("MiniCluster", "demo"))
    settle(fake, reconciler)
    fake.rbac = None
    kube.merge_patch("MiniCluster", "demo", {"spec": {"size": 3}})
    fake.rbac = rules()
    out = reconciler.reconcile(fake.get("MiniCluster", "demo"))
    assert out.problem is None and fake.refused == []
    assert fake.get("PersistentVolumeClaim", "demo-lead-state") is not None
    assert fake.get("Job", "demo")["spec"]["parallelism"] == 3
    assert "Ready" in conditions(fake.get("MiniCluster", "demo"))


def test_a_role_missing_a_verb_fails_with_the_403_the_operator_reports(fake, kube, ops):
    fake.rbac = None
    kube.apply(resource())
    narrowed = copy.deepcopy(rules())
    for rule in narrowed:
        if rule["resources"] == ["miniclusters/status"]:
            rule["verbs"] = ["get"]
    fake.rbac = narrowed
    with pytest.raises(
        Forbidden, match=r"forbidden: you may not patch miniclusters\.flux-framework\.org"
    ):
        Reconciler(ops).reconcile(fake.get("MiniCluster", "demo"))
    assert fake.refused == ["patch miniclusters/status"]


def test_autoscaling_is_allowed_by_the_role(fake, kube, ops):
    """A look that drains through exec and resizes the resource, under the role."""
    from fluxhop.operator.autoscale_timer import autoscale
    from fluxhop.workload.autoscale import DRAIN_REASON
    from fluxhop.workload.status import running_lead
    from tests.cluster.fakeexec import exec_through_fake
    from tests.cluster.rank0 import metrics

    fake.rbac = None
    fake.runner = lambda pod, index: None
    kube.apply(resource(size=4, maxSize=4, autoscale={"scaleDownDelaySeconds": 0}))
    fake.rbac = rules()
    reconciler = Reconciler(ops)
    reconciler.reconcile(fake.get("MiniCluster", "demo"))
    settle(fake, reconciler)
    ran = []
    fake.exec_runner = lambda pod, container, argv: (ran.append(argv), (0, "", ""))[1]
    answers = iter([metrics(allocated="0"), metrics(allocated="0", drained="1-3")])
    with exec_through_fake():
        for now in (1000, 1001):
            pods = fake.objects(kinds=("Pod",))
            autoscale(kube, fake.get("MiniCluster", "demo"), now=now,
                      lead=lambda p=pods: running_lead(p), scrape=lambda pod, port: next(answers))  # fmt: skip
    assert fake.refused == []
    assert DRAIN_REASON in ran[0] and fake.get("MiniCluster", "demo")["spec"]["size"] == 1


def test_the_multikueue_rbac_is_admissible_and_binds_what_it_names():
    """deploy/multikueue-*.yaml (applied apart, on a MultiKueue manager and
    its workers): valid, each role bound to the account the guide names;
    tests/realk8s/test_multikueue.py runs MultiKueue under exactly these."""
    for name, account in (("multikueue-manager.yaml", "kueue-controller-manager"),
                          ("multikueue-worker.yaml", "fluxhop-multikueue")):  # fmt: skip
        docs = list(yaml.safe_load_all((DEPLOY / name).read_text()))
        for doc in docs:
            validate(doc)
        (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
        (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "kueue-system"}
        ]
        assert name not in (DEPLOY / "kustomization.yaml").read_text()  # apart from -k deploy/
