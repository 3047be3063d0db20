"""Where rank 0 of an interactive MiniCluster keeps its state, decided as
fluxhop creates it (cluster/lead_volume.py): a claim of the default
StorageClass where the cluster has one and the policy that mounts it, an
emptyDir with a warning that says why where not; a claim asked for on a
cluster without the policy is refused in one line, nothing created.
tests/realk8s/test_lead_state.py runs the policy on the real API server."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.render.pod import LEAD_CLAIM_ANNOTATION, LEAD_STATE_VOLUME
from fluxhop.spec import MiniCluster
from tests.cluster import admission
from tests.cluster.fixtures import seed_lead_state_policy, seed_storage_class
from tests.documents import minicluster_doc


def spec(lead_state=None, *, interactive: bool = True, pod_annotations=None) -> MiniCluster:
    doc = minicluster_doc("demo", size=2, containers=[{"image": "ubuntu:noble"}])
    doc["spec"]["interactive"] = interactive
    if pod_annotations:
        doc["spec"]["pod"] = {"annotations": pod_annotations}
    if lead_state is not None:
        doc["spec"]["leadState"] = lead_state
    return MiniCluster.from_dict(doc)


def template(fake) -> dict:
    return fake.get("Job", "demo")["spec"]["template"]


def kept_in_empty_dir(fake) -> bool:
    volumes = template(fake)["spec"]["volumes"]
    return {"name": LEAD_STATE_VOLUME, "emptyDir": {}} in volumes


def test_a_default_class_and_the_policy_give_a_claim(fake, ops, lead_state_policy):
    seed_storage_class(fake, "slow", default=False)
    seed_storage_class(fake, "disk", default=True)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ops.create(spec())
    assert not [w for w in said if w.category is FluxhopWarning]
    claim = fake.get("PersistentVolumeClaim", "demo-lead-state")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "storageClassName" not in claim["spec"]  # the API server gives the default class
    assert template(fake)["metadata"]["annotations"][LEAD_CLAIM_ANNOTATION] == "demo-lead-state"
    assert not kept_in_empty_dir(fake)


@pytest.mark.parametrize(
    ("policy", "default_class", "why"),
    [
        (False, True, "the cluster has no MutatingAdmissionPolicy fluxhop-lead-state"),
        (True, False, "the cluster has no default StorageClass"),
    ],
)
def test_otherwise_an_empty_dir_and_a_warning_that_says_why(fake, ops, policy, default_class, why):
    if policy:
        seed_lead_state_policy(fake)
    seed_storage_class(fake, "disk", default=default_class)
    with pytest.warns(FluxhopWarning) as said:
        ops.create(spec())
    (line,) = [str(w.message) for w in said if w.category is FluxhopWarning]
    assert "keeps the instance's state in an emptyDir" in line and why in line
    assert "\n" not in line
    assert fake.get("PersistentVolumeClaim", "demo-lead-state") is None
    assert kept_in_empty_dir(fake)


def test_rbac_that_will_not_say_is_an_empty_dir_too(fake, ops, lead_state_policy):
    seed_storage_class(fake, "disk", default=True)
    fake.fail("GET", "storageclasses", 403, times=5)
    fake.fail("POST", "persistentvolumeclaims", 403, times=5)  # nor a dry run
    with pytest.warns(FluxhopWarning, match="may not list StorageClasses, and the dry-run claim"):
        ops.create(spec())
    assert kept_in_empty_dir(fake)


@pytest.fixture
def namespaced(fake):
    """A user of one namespace: no reads of admission policies or storage
    classes; what the API server's admission does to a dry-run create is
    what it has to go on (tests/cluster/admission.py)."""
    fake.fail("GET", "mutatingadmissionpolicies", 403, times=5)
    fake.fail("GET", "storageclasses", 403, times=5)
    fake.admission += [admission.default_storage_class(fake), admission.lead_state_policy(fake)]


def test_a_namespaced_user_finds_the_policy_and_the_class_by_dry_runs(
    fake, ops, lead_state_policy, namespaced
):
    seed_storage_class(fake, "disk", default=True)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ops.create(spec())
    # the class is known by name alone: whether its volumes are one node's is not
    (warned,) = [str(w.message) for w in said if w.category is FluxhopWarning]
    assert (
        "on a claim of the default StorageClass disk, whose provisioner fluxhop may not" in warned
    )
    assert warned.endswith("choose with spec.leadState (--lead-state emptyDir)")
    assert template(fake)["metadata"]["annotations"][LEAD_CLAIM_ANNOTATION] == "demo-lead-state"
    dry = [r for r in fake.requests if r.params.get("dryRun") == "All"]
    assert sorted(r.path.rsplit("/", 1)[-1] for r in dry) == ["persistentvolumeclaims", "pods"]
    stored = {name for (kind, _, name) in fake.store if kind in ("Pod", "PersistentVolumeClaim")}
    assert not [name for name in stored if "probe" in name]  # the dry runs stored nothing


@pytest.mark.parametrize(
    ("policy", "default_class", "refused", "why"),
    [
        (
            False,
            True,
            None,
            "a dry-run rank 0 pod in namespace default came back without its "
            "claim: the MutatingAdmissionPolicy fluxhop-lead-state is missing or not bound here",
        ),
        (True, False, None, "the cluster has no default StorageClass"),
        (
            True,
            True,
            "pods",
            r"may not read MutatingAdmissionPolicies, and the dry-run pod that "
            r"would find fluxhop-lead-state was refused \(.*forbidden",
        ),
    ],
)
def test_a_namespaced_user_without_them_gets_an_empty_dir_and_why(
    fake, ops, namespaced, policy, default_class, refused, why
):
    if policy:
        seed_lead_state_policy(fake)
    seed_storage_class(fake, "disk", default=default_class)
    if refused:
        fake.fail("POST", refused, 403, times=5)
    with pytest.warns(FluxhopWarning, match=why):
        ops.create(spec())
    assert kept_in_empty_dir(fake)


def test_a_claim_asked_for_without_the_policy_is_refused(fake, ops):
    with pytest.raises(SpecError) as caught:
        ops.create(spec({"size": "2Gi"}))
    said = str(caught.value)
    assert said.startswith("spec.leadState:") and "deploy/lead-state.yaml" in said
    assert "\n" not in said
    assert fake.get("Job", "demo") is None and fake.get("ConfigMap", "demo-flux-config") is None


def test_what_the_spec_says_is_kept(fake, ops):
    ops.create(spec({"emptyDir": True}))  # no policy needed, no warning
    assert kept_in_empty_dir(fake)


def test_a_batch_minicluster_keeps_no_state(fake, ops, lead_state_policy):
    seed_storage_class(fake, "disk", default=True)
    ops.create(spec(interactive=False))
    assert not kept_in_empty_dir(fake)
    assert "annotations" not in template(fake)["metadata"]


def test_a_create_again_keeps_what_it_was_made_with_and_says_nothing(fake, ops):
    with pytest.warns(FluxhopWarning):
        ops.create(spec())  # no policy: an emptyDir
    seed_lead_state_policy(fake)
    seed_storage_class(fake, "disk", default=True)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ops.create(spec())  # the same spec: nothing refused, nothing changed
    assert not [w for w in said if w.category is FluxhopWarning]
    assert kept_in_empty_dir(fake)
    assert fake.get("PersistentVolumeClaim", "demo-lead-state") is None


def test_a_default_class_on_one_nodes_disk_is_no_place_for_it(fake, ops, lead_state_policy):
    fake.seed("StorageClass", {"metadata": {"name": "local-path", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rancher.io/local-path"}, namespace="")  # fmt: skip
    with pytest.warns(FluxhopWarning, match="local-path keeps a volume on one node"):
        ops.create(spec())
    assert kept_in_empty_dir(fake)


def test_a_claim_of_the_name_already_there_means_an_empty_dir(fake, ops, lead_state_policy):
    seed_storage_class(fake, "disk", default=True)
    fake.seed("PersistentVolumeClaim", {"metadata": {"name": "demo-lead-state",
              "deletionTimestamp": "2026-12-05T06:00:00Z"}, "spec": {}})  # fmt: skip
    with pytest.warns(
        FluxhopWarning, match="demo-lead-state of an earlier MiniCluster is still being deleted"
    ):
        ops.create(spec())
    assert kept_in_empty_dir(fake)


def test_fluxhops_annotations_are_not_the_users():
    with pytest.raises(SpecError) as caught:
        spec(pod_annotations={"fluxhop.io/lead-state-claim": "other"})
    assert "fluxhop.io/lead-state-claim is fluxhop's" in str(caught.value)


def test_the_flag_chooses_and_silences_the_warning(cli_cluster, kubeconfig, capsys):
    """On a cluster without the policy, `create` warns that the state goes with
    rank 0's pod; `--lead-state emptyDir` is the user saying so, and is not warned."""
    from fluxhop.cli import main

    base = ["create", "--kubeconfig", str(kubeconfig), "-N", "2", "--image", "ubuntu"]
    assert main([*base, "--name", "told"]) == 0
    err = capsys.readouterr().err
    assert "keeps the instance's state in an emptyDir" in err
    warned = next(line for line in err.splitlines() if line.startswith("fluxhop: warning: "))
    assert warned.endswith("; choose with spec.leadState (--lead-state)")
    assert main([*base, "--name", "chose", "--lead-state", "emptyDir"]) == 0
    assert "emptyDir" not in capsys.readouterr().err
    volumes = cli_cluster.get("Job", "chose")["spec"]["template"]["spec"]["volumes"]
    assert {"name": LEAD_STATE_VOLUME, "emptyDir": {}} in volumes
    assert main([*base, "--name", "claimed", "--lead-state", "claim"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fluxhop: spec.leadState: rank 0 mounts its claim through")
    assert err.rstrip().endswith("or set spec.leadState.emptyDir: true (--lead-state emptyDir)")
    assert err.count("\n") == 1 and cli_cluster.get("Job", "claimed") is None


def test_a_claim_asked_for_by_a_namespaced_user_is_checked_by_a_dry_run_too(fake, ops, namespaced):
    """Without the policy in force, the dry-run rank 0 pod comes back without
    the claim: refused in one line, nothing made. A dry run refused too
    leaves it unknown: made, with a warning that says what was refused."""
    with pytest.raises(SpecError) as err:
        ops.create(spec({"claimName": "mine"}))
    message = str(err.value)
    assert "which a dry-run rank 0 pod in namespace default did not get" in message
    assert "\n" not in message and fake.get("Job", "demo") is None
    seed_lead_state_policy(fake)
    fake.fail("POST", "pods", 403, times=5)
    with pytest.warns(FluxhopWarning, match=r"the dry-run pod that would find .* was refused"):
        ops.create(spec({"claimName": "mine"}))
    assert fake.get("Job", "demo") is not None
