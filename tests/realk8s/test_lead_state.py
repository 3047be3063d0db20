"""spec.leadState on the real cluster, with real Flux and Fluxion: an
interactive MiniCluster with one job running and five pending loses rank 0's
pod. The Job makes a new one, which restarts the instance from the claim
fluxhop made (bound here to a hostPath PersistentVolume: the test cluster's
nodes share one host): the five are kept and then run, the running one ends
with an exception that says why, the history holds all six and nothing was
submitted twice, and the worker rejoins by itself. The same after rank 0's
broker is killed (restarted in its pod), and after its node is lost (its
kubelet stopped, its processes gone, the Node deleted as fluxhop advises):
from the last checkpoint."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluxhop.render.pod import (
    LEAD_CLAIM_ANNOTATION,
    LEAD_CONTAINER_ANNOTATION,
    LEAD_STATE_VOLUME,
)
from fluxhop.workload.marks import COMPLETION_INDEX
from tests.conformance import REPO
from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import LOST_NODE, ON_LOST_NODE, flux_image_flags, placed_minicluster
from tests.realk8s.replacing import running_pod
from tests.realk8s.tools import InNamespace, eventually, fluxhop, kubectl, scratch_namespace

pytestmark = pytest.mark.usefixtures("needs_flux")
POLICY = REPO / "deploy" / "lead-state.yaml"
NAME = "lasting"
LOST = "lost"  # the MiniCluster whose node is lost
SIMPLE = "simple"  # the MiniCluster made from flags, with sched-simple
DOCUMENT = f"""\
apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {{name: {NAME}}}
spec:
  size: 2
  interactive: true
  flux: {{container: {{disable: true}}}}
  containers: [{{image: host}}]
  leadState: {{size: 1Gi}}
"""
FIELDS = "{id}|{state}|{result}|{exception.type}|{exception.note}"
# the Job controller's, on each pod of a Job with backoffLimitPerIndex
INDEX_FAILURES = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED = "batch.kubernetes.io/job-index-ignored-failure-count"


@dataclass
class Lasting(InNamespace):
    name: str = NAME

    def flux(self, *args: str) -> str:
        return self.checked("proxy", self.name, "flux", *args)

    def jobs(self) -> dict[str, list[str]]:
        """Every job in the history: id -> state, result, exception type and note."""
        listed = self.flux("jobs", "-a", "-n", "-o", FIELDS)
        return {line.split("|")[0]: line.split("|")[1:] for line in listed.splitlines() if line}

    def pod(self, rank: int) -> dict[str, Any] | None:
        return running_pod(self.admin, self.namespace, self.name, rank)

    def replaced(self, lead: dict[str, Any]) -> bool:
        """A rank 0 running that is not ``lead``."""
        pod = self.pod(0)
        return pod is not None and pod["metadata"]["uid"] != lead["metadata"]["uid"]


def state_volume(admin: Api, namespace: str, name: str, root: Path, storage_class: str = "") -> str:
    """A hostPath PersistentVolume for the claim fluxhop makes for MiniCluster ``name``."""
    volume = f"lead-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    admin.create("/api/v1/persistentvolumes", {
        "metadata": {"name": volume},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": storage_class,
                 "hostPath": {"path": str(root), "type": "Directory"},
                 "claimRef": {"namespace": namespace, "name": f"{name}-lead-state"}}})  # fmt: skip
    return volume


@pytest.fixture(scope="module")
def lasting(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lasting]:
    """A namespace, the hostPath volumes, and deploy/lead-state.yaml's policy
    applied (as an admin does once): it mounts the claim in rank 0's pod."""
    root: Path = tmp_path_factory.mktemp("lead-state")
    with scratch_namespace(cluster) as (admin, namespace):
        volumes = [
            state_volume(admin, namespace, name, root / name) for name in (NAME, LOST, SIMPLE)
        ]
        kubectl(cluster, "apply", "-f", str(POLICY))
        # the API server loads a new policy within a second or so: wait for it to act
        eventually("the policy in force", lambda: policy_in_force(cluster, namespace), timeout=30)
        try:
            yield Lasting(cluster, admin, namespace)
        finally:
            kubectl(cluster, "delete", "-f", str(POLICY))
            for volume in volumes:
                admin.delete(f"/api/v1/persistentvolumes/{volume}")


def policy_in_force(cluster: LocalCluster, namespace: str) -> bool:
    """A rank 0 pod as the Job makes one, created with dry run, comes back with the claim."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "probe", "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "fluxhop", COMPLETION_INDEX: "0"},
        "annotations": {LEAD_CLAIM_ANNOTATION: "probe", LEAD_CONTAINER_ANNOTATION: "c"}},
        "spec": {"containers": [{"name": "c", "image": "host"}]}}  # fmt: skip
    done = kubectl(cluster, "create", "--dry-run=server", "-o", "json", "-f", "-",
                   stdin=json.dumps(pod))  # fmt: skip
    return LEAD_STATE_VOLUME in {v["name"] for v in json.loads(done.stdout)["spec"]["volumes"]}


def lead_volume(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((v for v in pod["spec"]["volumes"] if v["name"] == LEAD_STATE_VOLUME), None)


def queue(lasting: Lasting) -> tuple[str, list[str]]:
    """One job running on both nodes, then five waiting for them."""
    running = lasting.flux("submit", "-N2", "--exclusive", "sleep", "600").strip()
    eventually("the first job running", lambda: lasting.jobs()[running][0] == "RUN", timeout=60)
    pending = [lasting.flux("submit", "-N2", "echo", f"after {i}").strip() for i in range(5)]
    before = lasting.jobs()
    assert [before[job][0] for job in pending] == ["SCHED"] * 5, before
    return running, pending


def recovered(lasting: Lasting, running: str, pending: list[str], known: set[str]) -> list[str]:
    """After the loss: the five ran, and the history holds what it held and
    these six, each once. The running job's result, exception type and note."""
    eventually("the worker rejoined", lambda: lasting.online(lasting.name) == 2, timeout=120)
    eventually("the five kept jobs done",
               lambda: all(lasting.jobs()[job][0] == "INACTIVE" for job in pending), timeout=60)  # fmt: skip
    after = lasting.jobs()
    assert sorted(after) == sorted({running, *pending} | known), after  # nothing twice
    assert [after[job][1] for job in pending] == ["COMPLETED"] * 5, after
    return after[running][1:]


def test_a_new_rank_0_restarts_the_instance_from_its_state(lasting: Lasting, tmp_path: Path):
    document = tmp_path / "lasting.yaml"
    document.write_text(
        yaml.safe_dump(placed_minicluster(lasting.cluster, yaml.safe_load(DOCUMENT)))
    )
    done = lasting.fluxhop("create", "-f", str(document), timeout=240)
    assert done.returncode == 0, done.stderr
    eventually("both brokers online", lambda: lasting.online(NAME) == 2, timeout=120)
    running, pending = queue(lasting)

    lead = lasting.pod(0)
    worker = lasting.pod(1)
    assert lead is not None and worker is not None
    # the policy mounted the claim in rank 0's pod, and in no other
    assert lead_volume(lead) == {"name": LEAD_STATE_VOLUME,
                                 "persistentVolumeClaim": {"claimName": f"{NAME}-lead-state"}}  # fmt: skip
    assert lead_volume(worker) is None
    pods = f"/api/v1/namespaces/{lasting.namespace}/pods"
    lasting.admin.delete(f"{pods}/{lead['metadata']['name']}")

    eventually("a new rank 0 running", lambda: lasting.replaced(lead), timeout=120)
    # The Job counts rank 0's losses on its own (backoffLimitPerIndex: the
    # count is on rank 0's pods alone), and this loss was not a failure (the
    # podFailurePolicy ignored it).
    counts = (lasting.pod(0) or {})["metadata"]["annotations"]
    assert counts.get(INDEX_FAILURES) == "0" and counts.get(INDEX_IGNORED) == "1", counts
    result, kind, note = recovered(lasting, running, pending, set())
    assert (result, kind) == ("FAILED", "lead-lost"), note
    assert "rank 0's pod was stopped" in note
    metrics = json.loads(lasting.checked("status", NAME, "-o", "json"))["metrics"]
    assert metrics["lead_restarts"] == 1, metrics
    assert "1 from the kept state, last" in lasting.checked("status", NAME)
    # the worker's broker restarted and rejoined; its pod is the one it had
    again = lasting.pod(1)
    assert again is not None and again["metadata"]["uid"] == worker["metadata"]["uid"]
    rows = [line.split() for line in lasting.checked("jobs", NAME, "-a").splitlines()[1:]]
    assert sorted((row[2], row[3]) for row in rows) == [("echo", "CD")] * 5 + [("sleep", "F")]
    # the new instance takes jobs as the old one did
    assert lasting.flux("run", "-N2", "echo", "hello").split() == ["hello", "hello"]


def test_sched_simple_from_flags_restarts_from_its_state_too(lasting: Lasting):
    """Made from flags (--sched-simple --lead-state), and scheduled by Flux's
    own sched-simple rather than Fluxion: the new rank 0 loads sched-simple
    again once the running job has ended, and the five run."""
    simple = replace(lasting, name=SIMPLE)
    done = simple.fluxhop("create", "--name", SIMPLE, "-N", "2", *flux_image_flags(simple.cluster),
                          "--sched-simple", "--lead-state", "size=1Gi",
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "emptyDir" not in done.stderr  # asked for, so made: no warning
    eventually("both brokers online", lambda: simple.online(SIMPLE) == 2, timeout=120)
    assert "sched-simple" in simple.flux("module", "list")
    running, pending = queue(simple)
    lead = simple.pod(0)
    assert lead is not None and lead_volume(lead) == {
        "name": LEAD_STATE_VOLUME,
        "persistentVolumeClaim": {"claimName": f"{SIMPLE}-lead-state"},
    }
    simple.admin.delete(f"/api/v1/namespaces/{simple.namespace}/pods/{lead['metadata']['name']}")

    eventually("a new rank 0 running", lambda: simple.replaced(lead), timeout=120)
    result, kind, note = recovered(simple, running, pending, set())
    assert (result, kind) == ("FAILED", "lead-lost"), note
    modules = simple.flux("module", "list")
    assert "sched-simple" in modules and "sched-fluxion" not in modules, modules
    assert simple.fluxhop("delete", SIMPLE, timeout=240).returncode == 0  # room for the next


def test_a_failed_broker_restarts_from_the_last_checkpoint(lasting: Lasting):
    """Rank 0's broker killed (as a crash, or a node lost, would): nothing
    is saved at the end. Its entrypoint starts it again, in the same pod,
    from the last checkpoint (the test makes one, where Flux makes one every
    second by itself), and loads the scheduler only once job-exec has ended
    the job that was running: Fluxion would otherwise hold its nodes as
    allocated for ever, and the five would never run."""
    assert lasting.online(NAME) == 2  # after the test before
    known = set(lasting.jobs())
    running, pending = queue(lasting)
    lasting.flux("kvs", "sync")
    lead = lasting.pod(0)
    assert lead is not None
    pid = lasting.flux("getattr", "broker.pid").strip()
    container = lead["spec"]["containers"][0]["name"]
    kubectl(lasting.cluster, "exec", "-n", lasting.namespace, lead["metadata"]["name"], "-c",
            container, "--", "kill", "-KILL", pid)  # fmt: skip
    result, kind, note = recovered(lasting, running, pending, known)
    assert (result, kind) == ("FAILED", "exec"), note
    again = lasting.pod(0)
    assert again is not None and again["metadata"]["uid"] == lead["metadata"]["uid"]
    assert lasting.flux("getattr", "broker.pid").strip() != pid


def on_the_lost_node(cluster: LocalCluster, document: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The node the lost-node test loses, and ``document`` placed there."""
    placed = placed_minicluster(cluster, document)
    placed["spec"]["pod"].update(copy.deepcopy(ON_LOST_NODE))
    return LOST_NODE, placed


def test_a_lost_node_takes_rank_0_and_the_instance_comes_back(lasting: Lasting, tmp_path: Path):
    """Both brokers on one node; its kubelet stops and its processes go (the
    node died), and the Node is deleted, as fluxhop run says to do for a node
    that stopped answering: the pod garbage collector ends the pods and the
    Job makes them again; once the node is back, the new rank 0 restarts the
    instance from the last checkpoint (the test makes one, where Flux makes
    one every second) and the running job ends with Flux's own exception."""
    lost = replace(lasting, name=LOST)
    node, placed = on_the_lost_node(lasting.cluster, yaml.safe_load(
        DOCUMENT.replace(f"name: {NAME}", f"name: {LOST}")))  # fmt: skip
    if node not in lasting.cluster.ready_nodes(lasting.admin):
        lasting.cluster.start_kubelet(node)  # a test before may have left it deleted
        eventually(f"{node} Ready", lambda: node in lasting.cluster.ready_nodes(lasting.admin),
                   timeout=60)  # fmt: skip
    document = tmp_path / "lost.yaml"
    document.write_text(yaml.safe_dump(placed))
    done = lost.fluxhop("create", "-f", str(document), timeout=240)
    assert done.returncode == 0, done.stderr
    eventually("both brokers online", lambda: lost.online(LOST) == 2, timeout=120)
    running, pending = queue(lost)
    lost.flux("kvs", "sync")
    lead = lost.pod(0)
    assert lead is not None and lead["spec"]["nodeName"] == node
    lasting.cluster.stop_kubelet(node)
    lasting.cluster.remove_pods_of(node)
    lasting.admin.delete(f"/api/v1/nodes/{node}")
    old = {pod["metadata"]["uid"] for pod in (lead, lost.pod(1)) if pod is not None}

    def collected() -> bool:
        pods = lasting.admin.get(f"/api/v1/namespaces/{lasting.namespace}/pods")["items"]
        return not old & {pod["metadata"]["uid"] for pod in pods}

    eventually("the pod garbage collector ended the lost pods", collected, timeout=180)
    lasting.cluster.start_kubelet(node)  # the node back (or a new one of its kind)

    eventually("a new rank 0 running", lambda: lost.replaced(lead), timeout=180)
    result, kind, note = recovered(lost, running, pending, set())
    assert (result, kind) == ("FAILED", "exec"), note


CHOSEN = "chosen"  # the MiniCluster that says nothing of its state
DEFAULT_CLASS = "fluxhop-test-default"
# a provisioner of shared volumes, as far as fluxhop can tell (none runs here:
# the test makes the volume; a node-local one would get no claim by default)
SHARED = "example.com/shared"


def unstated(cluster: LocalCluster, name: str) -> str:
    """DOCUMENT as ``name``, placed, saying nothing of its state (no leadState)."""
    document = yaml.safe_load(DOCUMENT.replace(f"name: {NAME}", f"name: {name}"))
    del document["spec"]["leadState"]
    return yaml.safe_dump(placed_minicluster(cluster, document))


def test_a_minicluster_that_says_nothing_keeps_its_state_on_the_default_class(
    lasting: Lasting, tmp_path: Path
):
    """The cluster has a default StorageClass (here one whose volume the test
    makes: a hostPath PersistentVolume waits for the claim) and the
    policy: fluxhop makes the claim without naming a class, the API server
    gives it the default one, and rank 0 keeps the instance on it."""
    chosen = replace(lasting, name=CHOSEN)
    classes = "/apis/storage.k8s.io/v1/storageclasses"
    lasting.admin.create(classes, {
        "metadata": {"name": DEFAULT_CLASS,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": SHARED})  # fmt: skip
    root = tmp_path / "state"
    volume = state_volume(lasting.admin, lasting.namespace, CHOSEN, root, DEFAULT_CLASS)
    try:
        document = tmp_path / "chosen.yaml"
        document.write_text(unstated(lasting.cluster, CHOSEN))
        assert "leadState" not in document.read_text()
        done = chosen.fluxhop("create", "-f", str(document), timeout=240)
        assert done.returncode == 0, done.stderr
        assert "emptyDir" not in done.stderr  # no warning: the state is kept
        claim = lasting.admin.get(f"/api/v1/namespaces/{lasting.namespace}/persistentvolumeclaims/"
                                  f"{CHOSEN}-lead-state")  # fmt: skip
        assert claim["spec"]["storageClassName"] == DEFAULT_CLASS
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        eventually("both brokers online", lambda: chosen.online(CHOSEN) == 2, timeout=120)
        lead, worker = chosen.pod(0), chosen.pod(1)
        assert lead is not None and worker is not None
        assert lead_volume(lead) is not None and lead_volume(worker) is None
        chosen.flux("kvs", "sync")
        assert (root / "state" / "content.sqlite").is_file()  # on the claim's volume
    finally:
        chosen.fluxhop("delete", CHOSEN, timeout=240)
        lasting.admin.delete(f"{classes}/{DEFAULT_CLASS}")
        lasting.admin.delete(f"/api/v1/persistentvolumes/{volume}")


MINE = "mine"  # the MiniCluster a user of the namespace alone makes


def test_a_namespaced_user_gets_the_claim_by_dry_runs(lasting: Lasting, tmp_path: Path):
    """A user bound to Kubernetes' own ``edit`` role in the namespace may read
    neither StorageClasses nor admission policies. fluxhop asks the API
    server's admission instead, with dry-run creates that store nothing (a
    rank 0 pod comes back with the claim, a claim without a class with the
    default one), and makes the claim, as for an admin."""
    admin, namespace = lasting.admin, lasting.namespace
    admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "user"}})
    admin.create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": "user-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "user", "namespace": namespace}]})  # fmt: skip
    token = lasting.cluster.token(namespace, "user")
    kubeconfig = lasting.cluster.kubeconfig("user", token=token)
    classes = "/apis/storage.k8s.io/v1/storageclasses"
    policies = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies"
    with Api(lasting.cluster.credentials(token=token)) as user:
        for path in (classes, f"{policies}/fluxhop-lead-state"):
            with pytest.raises(ApiError) as refused:
                user.get(path)
            assert refused.value.status == 403, path  # the premise: the user may not read them
    document = tmp_path / "mine.yaml"
    document.write_text(unstated(lasting.cluster, MINE))
    with ExitStack() as undo:  # each made thing undone, whatever fails after it
        admin.create(classes, {
            "metadata": {"name": DEFAULT_CLASS,
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": SHARED})  # fmt: skip
        undo.callback(admin.delete, f"{classes}/{DEFAULT_CLASS}")
        volume = state_volume(admin, namespace, MINE, tmp_path / "state", DEFAULT_CLASS)
        undo.callback(admin.delete, f"/api/v1/persistentvolumes/{volume}")
        undo.callback(fluxhop, lasting.cluster, "delete", "--namespace", namespace, MINE,
                      timeout=240)  # fmt: skip
        done = fluxhop(lasting.cluster, "create", "--namespace", namespace, "-f", str(document),
                       kubeconfig=kubeconfig)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "state in an emptyDir" not in done.stderr, done.stderr  # the state is kept
        # the class was found by name alone, and the warning says what that leaves unknown
        assert f"default StorageClass {DEFAULT_CLASS}, whose provisioner" in done.stderr
        claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        claim = admin.get(f"{claims}/{MINE}-lead-state")
        assert claim["spec"]["storageClassName"] == DEFAULT_CLASS
        stored = [o["metadata"]["name"] for kind in ("persistentvolumeclaims", "pods")
                  for o in admin.get(f"/api/v1/namespaces/{namespace}/{kind}")["items"]]  # fmt: skip
        assert not [name for name in stored if "probe" in name], stored  # dry runs store nothing
        mine = replace(lasting, name=MINE)
        lead = eventually("rank 0 running", lambda: mine.pod(0), timeout=120)
        assert lead_volume(lead) == {
            "name": LEAD_STATE_VOLUME,
            "persistentVolumeClaim": {"claimName": f"{MINE}-lead-state"},
        }
