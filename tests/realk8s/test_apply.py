"""What fluxhop sends, judged by the real API server: every example renders
to objects it accepts with strict field validation (a server-side dry run),
on every target; and applying a MiniCluster twice is a no-op (server-side
apply with fluxhop's field manager: no new resourceVersion). Nothing here
needs Flux."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from fluxhop.cluster.api import FIELD_MANAGER, Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import FluxhopError, FluxhopWarning
from fluxhop.render import TARGETS, render
from fluxhop.spec import MiniCluster
from fluxhop.spec.names import dns_label_problem
from fluxhop.spec.rules import env_name_problem, resource_name_problem
from tests.conformance import CONFORMANCE
from tests.documents import minicluster_doc
from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.tools import eventually, fluxhop, kubectl

# the upstream Flux Operator's examples (fluxhop's own: tests/realk8s/test_examples.py)
EXAMPLES = sorted((CONFORMANCE / "operator-examples").glob("*.yaml"))
# kind -> (API path prefix, plural), for what fluxhop renders
PATHS = {
    "ConfigMap": ("/api/v1", "configmaps"),
    "Secret": ("/api/v1", "secrets"),
    "Service": ("/api/v1", "services"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    "Job": ("/apis/batch/v1", "jobs"),
    "JobSet": ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets"),
    "MiniCluster": ("/apis/flux-framework.org/v1alpha2", "miniclusters"),
}


def collection(obj: dict, namespace: str) -> str:
    prefix, plural = PATHS[obj["kind"]]
    return f"{prefix}/namespaces/{namespace}/{plural}"


def rendered(path: Path, target: str) -> list[dict] | None:
    """The objects fluxhop makes of an example, or None where it refuses it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FluxhopWarning)
        try:
            return render(MiniCluster.from_yaml(path.read_text()), target)
        except FluxhopError:
            return None


@pytest.mark.parametrize("target", TARGETS)
def test_every_example_passes_a_strict_server_side_dry_run(
    crds: None, admin: Api, namespace: str, target: str
):
    refused, checked = [], 0
    for path in EXAMPLES:
        objects = rendered(path, target)
        if objects is None:
            continue
        for obj in objects:
            obj["metadata"]["namespace"] = namespace
            try:
                admin.create(
                    collection(obj, namespace), obj, dryRun="All", fieldValidation="Strict"
                )
                checked += 1
            except ApiError as error:
                refused.append(f"{path.name} {obj['kind']}: {error}")
    assert not refused, "\n".join(refused)
    assert checked >= len(EXAMPLES)  # most examples render, to one or more objects
    leftover = admin.get(collection({"kind": "ConfigMap"}, namespace))["items"]
    assert [c["metadata"]["name"] for c in leftover] == [
        "kube-root-ca.crt"
    ]  # a dry run stores nothing


def test_the_dry_run_can_fail(crds: None, admin: Api, namespace: str):
    job = next(o for o in rendered(EXAMPLES[0], "job") or [] if o["kind"] == "Job")
    job["spec"]["parallelizm"] = 2
    with pytest.raises(ApiError) as refused:
        admin.create(collection(job, namespace), job, dryRun="All", fieldValidation="Strict")
    assert (
        refused.value.status == 400 and 'unknown field "spec.parallelizm"' in refused.value.message
    )


def held(name: str) -> MiniCluster:
    """A MiniCluster held by spec.suspend: its Job stays suspended, so
    nothing but fluxhop writes to it (and no Kueue need be absent or
    present: a queue label would ask fluxhop to check the queue)."""
    doc = minicluster_doc(
        name,
        size=2,
        interactive=True,
        suspend=True,
        flux={"container": {"disable": True}},
        containers=[{"image": "host"}],
    )
    return MiniCluster.from_dict(doc)


def versions(admin: Api, namespace: str) -> dict[str, str]:
    out = {}
    for kind in ("ConfigMap", "Secret", "Service", "NetworkPolicy", "Job"):
        for obj in admin.get(collection({"kind": kind}, namespace))["items"]:
            if obj["metadata"]["name"] != "kube-root-ca.crt":
                out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    return out


def test_applying_twice_changes_nothing(cluster: LocalCluster, admin: Api, namespace: str):
    kube = Kube.connect(str(cluster.admin_kubeconfig), namespace=namespace)
    try:
        ops = MiniClusters(kube)
        ops.create(held("twice"))
        job = f"/apis/batch/v1/namespaces/{namespace}/jobs/twice"
        eventually("the Job controller's Suspended condition", lambda: any(
            c["type"] == "Suspended" for c in admin.get(job).get("status", {}).get("conditions") or []))  # fmt: skip
        before = versions(admin, namespace)
        assert set(before) == {"ConfigMap/twice-flux-config", "Secret/twice-flux-curve",
                               "Service/twice", "NetworkPolicy/twice-flux-broker", "Job/twice"}  # fmt: skip
        ops.create(held("twice"))
        assert versions(admin, namespace) == before
        managers = {m["manager"] for m in admin.get(job)["metadata"]["managedFields"]}
        assert FIELD_MANAGER in managers
    finally:
        kube.close()


ENV_NAMES = ["my.var", "1abc", "a b", "a-b", "~!@#$%", "A=B", "A\tB", "é", "A\x7f"]


@pytest.mark.parametrize("name", ENV_NAMES, ids=repr)
def test_the_env_name_rule_is_the_api_servers(admin: Api, namespace: str, name: str):
    """fluxhop refuses an environment variable name exactly when the API
    server does (1.34+: printable ASCII but '=')."""
    container = {"name": "c", "image": "host", "env": [{"name": name, "value": "x"}]}
    assert (env_name_problem(name) is None) == _server_accepts(admin, namespace, container)


def _server_accepts(
    admin: Api, namespace: str, container: dict, volumes: list | None = None
) -> bool:
    """Whether the API server takes a pod with this container (dry run)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rule", "namespace": namespace},
           "spec": {"containers": [container], **({"volumes": volumes} if volumes else {})}}  # fmt: skip
    try:
        admin.create(f"/api/v1/namespaces/{namespace}/pods", pod, dryRun="All")
        return True
    except ApiError as error:
        assert error.status == 422, error
        return False


# either side of each part of the rule: the standard names, hugepages, a
# domain, kubernetes.io's own, quota's requests. prefix, a label key's limits
RESOURCE_NAMES = [
    "cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "storage", "pods", "gpu", "1",
    "nvidia.com/gpu", "example.com/a_b", "example.com/-a", "Example.com/gpu", "kubernetes.io/x",
    "requests.example.com/x", "example.com/" + "a" * 63, "example.com/" + "a" * 64,
    "a" * 244 + ".com/x", "a" * 245 + ".com/x", "example.com/", "/gpu",
]  # fmt: skip


@pytest.mark.parametrize("name", RESOURCE_NAMES, ids=lambda n: n[:30])
def test_the_resource_name_rule_is_the_api_servers(admin: Api, namespace: str, name: str):
    """fluxhop refuses a container's requests or limits key exactly when the
    API server does (issue #34: a TrainJob's limit named 1 reached the pod)."""
    amount = "2Mi" if name.startswith("hugepages-") else "1"
    container = {"name": "c", "image": "host", "resources": {"limits": {name: amount}}}
    if name.startswith("hugepages-"):
        container["resources"]["limits"]["memory"] = "2Mi"  # hugepages need cpu or memory beside
    assert (resource_name_problem(name) is None) == _server_accepts(admin, namespace, container)


LABELS = ["flux-view", "a", "a" * 63, "a" * 64, "Flux-View", "flux_view", "-a", "a-", "a.b", "1a"]


@pytest.mark.parametrize("name", LABELS, ids=lambda n: n[:20])
def test_the_container_and_volume_name_rules_are_the_api_servers(
    admin: Api, namespace: str, name: str
):
    """spec.flux.container.name becomes an init container's name and volume
    names are volumes': both DNS labels, refused before sending."""
    container = {"name": name, "image": "host"}
    assert (dns_label_problem(name) is None) == _server_accepts(admin, namespace, container)
    mounted = {"name": "c", "image": "host", "volumeMounts": [{"name": name, "mountPath": "/v"}]}
    volume = [{"name": name, "emptyDir": {}}]
    assert (dns_label_problem(name) is None) == _server_accepts(admin, namespace, mounted, volume)


def test_rendered_yaml_reads_back_in_kubectl(cluster: LocalCluster, crds: None, namespace: str):
    """`fluxhop render | kubectl apply -f -`: words go-yaml reads as a bool or
    a number (y, 1e3, 08) stay strings (fluxhop quotes them)."""
    words = ["y", "n", "on", "1e3", "08", "0x1F", "1_000"]
    rendered = fluxhop(
        cluster, "run", "--dry-run", "--namespace", namespace, "--image", "host",
        *[f"--env=W{i}={w}" for i, w in enumerate(words)], "--", "echo", *words,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    done = kubectl(cluster, "apply", "--dry-run=server", "-o", "json", "-f", "-",
                   stdin=rendered.stdout, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    job = next(o for o in json.loads(done.stdout)["items"] if o["kind"] == "Job")
    (lead,) = [c for c in job["spec"]["template"]["spec"]["containers"] if c.get("args")]
    assert lead["args"][-len(words) :] == words
    env = {e["name"]: e.get("value") for e in lead["env"]}
    assert [env[f"W{i}"] for i in range(len(words))] == words
