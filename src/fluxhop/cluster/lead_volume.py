"""Where rank 0 of an interactive MiniCluster keeps the instance's state on
this cluster (spec.leadState), decided as it is created.

A spec that says nothing gets a claim of the cluster's default StorageClass
where the cluster has one and has the MutatingAdmissionPolicy that mounts
the claim in rank 0's pod (deploy/lead-state.yaml); otherwise an emptyDir,
which outlives a restart of rank 0's broker but not the loss of its pod, and
a warning that says why. Not a claim either where it would hold rank 0 to
one node (a default class whose volumes are a node's own: a new rank 0
could not start elsewhere), nor where a claim of that name is already there
(an earlier MiniCluster's, still going). A spec that names a claim on a
cluster without the policy is refused: its claim would never be mounted.
A MiniCluster made before keeps what it was made with, unchecked and
unwarned (a create again of the same spec changes nothing).

A user who may not read these (a namespace's user, as a rule) is answered
by the API server's admission instead (cluster/lead_probes.py); a default
class found so has no provisioner to judge, and the claim on it comes with
a warning saying so.

Rendering stays pure: this is asked of the API server at the edge (the
CLI's create, the operator's), and what it decides is written into the spec
rendered.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

from fluxhop.cluster.api import Kube
from fluxhop.cluster.lead_probes import Unknown, default_class_name, policy_in_force
from fluxhop.errors import AlreadyExists, FluxhopWarning, Forbidden, SpecError
from fluxhop.render.pod import LEAD_STATE_POLICY
from fluxhop.render.targets import Target
from fluxhop.spec.leadstate import LeadState, made_claim_name
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload.root import Root

__all__ = ["refuse_foreign_claims", "with_lead_volume"]

DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",  # still honoured by Kubernetes
)
# Provisioners whose volumes are one node's disk (kind's and k3s's local-path,
# minikube's and microk8s's hostpath, static local volumes, OpenEBS local PV).
NODE_LOCAL = frozenset({
    "rancher.io/local-path",
    "k8s.io/minikube-hostpath",
    "microk8s.io/hostpath",
    "kubernetes.io/no-provisioner",
    "openebs.io/local",
})  # fmt: skip
INSTALL = "an admin applies deploy/lead-state.yaml, Kubernetes 1.36 or later"


Policy = Literal["in force", "absent", "not in force"]


def _policy(kube: Kube) -> Policy | Unknown:
    """Whether LEAD_STATE_POLICY mounts rank 0's claim: read by name, or,
    where RBAC will not have it read, asked of admission (cluster/lead_probes.py)."""
    try:
        found = kube.get("MutatingAdmissionPolicy", LEAD_STATE_POLICY)
    except Forbidden:
        probed = policy_in_force(kube)
        if isinstance(probed, Unknown):
            return probed
        return "in force" if probed else "not in force"
    return "in force" if found is not None else "absent"


def _default_class(kube: Kube) -> dict[str, Any] | Unknown:
    """The default StorageClass, {} when there is none. Found by admission
    where RBAC will not have them listed: then by name alone (no provisioner)."""
    try:
        classes = kube.list("StorageClass")
    except Forbidden:
        named = default_class_name(kube)
        if isinstance(named, Unknown):
            return named
        return {"metadata": {"name": named}} if named else {}
    for found in classes:
        annotations = found["metadata"].get("annotations") or {}
        if any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS):
            return found
    return {}


def _policy_problem(kube: Kube, policy: Policy | Unknown) -> str | None:
    if isinstance(policy, Unknown):
        return (
            f"fluxhop may not read MutatingAdmissionPolicies, and the dry-run pod that would "
            f"find {LEAD_STATE_POLICY} was refused ({policy.why})"
        )
    if policy == "absent":
        return f"the cluster has no MutatingAdmissionPolicy {LEAD_STATE_POLICY} ({INSTALL})"
    if policy == "not in force":
        return (
            f"a dry-run rank 0 pod in namespace {kube.namespace} came back without its claim: "
            f"the MutatingAdmissionPolicy {LEAD_STATE_POLICY} is missing or not bound here "
            f"({INSTALL})"
        )
    return None


def _why_not_a_claim(
    kube: Kube, claim: str, owner_uid: str | None
) -> tuple[str | None, dict[str, Any]]:
    """Why rank 0 gets no claim by default (None: it does), and the default
    StorageClass as far as it was found."""
    problem = _policy_problem(kube, _policy(kube))
    if problem is not None:
        return problem, {}
    default = _default_class(kube)
    if isinstance(default, Unknown):
        return (
            "fluxhop may not list StorageClasses, and the dry-run claim that would find the "
            f"default one was refused ({default.why})",
            {},
        )
    if not default:
        return "the cluster has no default StorageClass", {}
    if default.get("provisioner") in NODE_LOCAL:
        why = (
            f"the default StorageClass {default['metadata']['name']} keeps a volume on one "
            "node, and a new rank 0 could start nowhere else"
        )
        return why, default
    return _foreign_claim(kube, claim, owner_uid), default


def _foreign_claim(kube: Kube, name: str, owner_uid: str | None) -> str | None:
    """Why claim ``name`` is not for a new MiniCluster to use, None when it
    may: absent, or owned by ``owner_uid`` and not going."""
    found = kube.get("PersistentVolumeClaim", name)
    if found is None:
        return None
    owners = {ref.get("uid") for ref in found["metadata"].get("ownerReferences") or []}
    going = bool(found["metadata"].get("deletionTimestamp"))
    if owner_uid is not None and owner_uid in owners and not going:
        return None
    if going:
        return f"PersistentVolumeClaim {name} of an earlier MiniCluster is still being deleted"
    return f"PersistentVolumeClaim {name} already exists"


def refuse_foreign_claims(
    kube: Kube, objects: Sequence[dict[str, Any]], owner_uid: str | None = None
) -> None:
    """A new MiniCluster never takes over a claim already there (spec.leadState's
    ``<name>-lead-state``) unless ``owner_uid`` owns it: one of an earlier
    MiniCluster of the name still going (its pods hold it) would vanish under
    the new one, and any other would hand the new instance a queue that is
    not its own."""
    for obj in objects:
        if obj["kind"] != "PersistentVolumeClaim":
            continue
        why = _foreign_claim(kube, obj["metadata"]["name"], owner_uid)
        if why is None:
            continue
        if "still being deleted" in why:
            raise AlreadyExists(f"{why}; create again once it is gone")
        raise AlreadyExists(f"{why}; delete it, or keep it and name it in spec.leadState.claimName")


def with_lead_volume(
    kube: Kube,
    spec: MiniCluster,
    target: Target | str,
    *,
    existing: dict[str, Any] | None = None,
    owner_uid: str | None = None,
) -> MiniCluster:
    """``spec`` with spec.leadState decided for this cluster (a copy when
    changed). ``existing``: the root already made for it, whose choice is
    kept; ``owner_uid``: the owner of a claim already there that is its own
    (the operator's resource, after an interrupted create)."""
    state = spec.spec.lead_state
    target = Target.parse(target)
    if not spec.spec.interactive or target is Target.MINICLUSTER:
        return spec  # a batch rank 0 is not restarted; the Flux Operator keeps no state
    if existing is not None:
        return _as_made(spec, Root(target, existing))
    if state is not None and state.empty_dir:
        return spec
    if state is not None:
        _check_policy(kube)
        return spec
    why, default = _why_not_a_claim(kube, made_claim_name(spec.name), owner_uid)
    decided = spec.model_copy(deep=True)
    if why is None:
        if "provisioner" not in default:  # found by admission: by name alone
            warnings.warn(
                f"rank 0 of {spec.name} keeps the instance's state on a claim of the default "
                f"StorageClass {default['metadata']['name']}, whose provisioner fluxhop may not "
                "read: if its volumes are one node's (local-path, hostpath), a new rank 0 could "
                "start nowhere else; choose with spec.leadState (--lead-state emptyDir)",
                FluxhopWarning,
                stacklevel=2,
            )
        decided.spec.lead_state = LeadState()
        return decided
    warnings.warn(
        f"rank 0 of {spec.name} keeps the instance's state in an emptyDir, which outlives a "
        f"restart of its broker but not the loss of its pod: {why}; "
        "choose with spec.leadState (--lead-state)",
        FluxhopWarning,
        stacklevel=2,
    )
    decided.spec.lead_state = LeadState(empty_dir=True)
    return decided


def _check_policy(kube: Kube) -> None:
    """A claim the spec asks for is mounted by the policy: refused without it."""
    policy = _policy(kube)
    if isinstance(policy, Unknown):
        warnings.warn(
            f"spec.leadState: {_policy_problem(kube, policy)}; without {LEAD_STATE_POLICY} "
            f"({INSTALL}) rank 0's state goes with its pod",
            FluxhopWarning,
            stacklevel=3,
        )
        return
    where = {
        "absent": "which this cluster does not have",
        "not in force": f"which a dry-run rank 0 pod in namespace {kube.namespace} did not get "
        "(the policy is missing or not bound here)",
    }.get(policy)
    if where is not None:
        raise SpecError(
            f"spec.leadState: rank 0 mounts its claim through the MutatingAdmissionPolicy "
            f"{LEAD_STATE_POLICY}, {where}; {INSTALL}, or set "
            "spec.leadState.emptyDir: true (--lead-state emptyDir)"
        )


def _as_made(spec: MiniCluster, root: Root) -> MiniCluster:
    """The spec as its root was made, for a create again of the same spec."""
    if spec.spec.lead_state is not None or root.lead_state_kept is None:
        return spec
    made = spec.model_copy(deep=True)
    made.spec.lead_state = LeadState(empty_dir=root.lead_state_kept == "emptyDir")
    return made
