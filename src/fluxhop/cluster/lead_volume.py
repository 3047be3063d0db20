"""Where rank 0 of an interactive MiniCluster keeps the instance's state on
this cluster (spec.leadState), decided as it is created.

A spec that says nothing gets a claim of the cluster's default StorageClass
where the cluster has one and has the MutatingAdmissionPolicy that mounts
the claim in rank 0's pod (deploy/lead-state.yaml); otherwise an emptyDir,
which outlives a restart of rank 0's broker but not the loss of its pod, and
a warning that says why. A spec that names a claim on a cluster without the
policy is refused: its claim would never be mounted. Rendering stays pure:
this is asked of the API server at the edge (the CLI's create, the
operator's), and what it decides is written into the spec rendered.
"""

from __future__ import annotations

import warnings

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopWarning, Forbidden, SpecError
from fluxhop.render.pod import LEAD_STATE_POLICY
from fluxhop.render.targets import Target
from fluxhop.spec.leadstate import LeadState
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["DEFAULT_CLASS_ANNOTATIONS", "with_lead_volume"]

DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",  # still honoured by Kubernetes
)
INSTALL = "an admin applies deploy/lead-state.yaml"


def _policy(kube: Kube) -> bool | None:
    """Whether the cluster has LEAD_STATE_POLICY; None when RBAC will not say."""
    try:
        return kube.get("MutatingAdmissionPolicy", LEAD_STATE_POLICY) is not None
    except Forbidden:
        return None


def _default_class(kube: Kube) -> str | None:
    """The default StorageClass's name, "" when there is none; None when RBAC will not say."""
    try:
        classes = kube.list("StorageClass")
    except Forbidden:
        return None
    for found in classes:
        annotations = found["metadata"].get("annotations") or {}
        if any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS):
            return str(found["metadata"]["name"])
    return ""


def _why_not_a_claim(kube: Kube) -> str | None:
    policy = _policy(kube)
    if policy is None:
        return f"fluxhop may not read MutatingAdmissionPolicies to find {LEAD_STATE_POLICY}"
    if not policy:
        return f"the cluster has no MutatingAdmissionPolicy {LEAD_STATE_POLICY} ({INSTALL})"
    default = _default_class(kube)
    if default is None:
        return "fluxhop may not list StorageClasses to find the default one"
    if not default:
        return "the cluster has no default StorageClass"
    return None


def with_lead_volume(kube: Kube, spec: MiniCluster, target: Target | str) -> MiniCluster:
    """``spec`` with spec.leadState decided for this cluster (a copy when changed)."""
    state = spec.spec.lead_state
    if not spec.spec.interactive or Target.parse(target) is Target.MINICLUSTER:
        return spec  # a batch rank 0 is not restarted; the Flux Operator keeps no state
    if state is not None and state.empty_dir:
        return spec
    if state is not None:
        policy = _policy(kube)
        if policy is False:
            raise SpecError(
                f"spec.leadState: rank 0 mounts its claim through the MutatingAdmissionPolicy "
                f"{LEAD_STATE_POLICY}, which this cluster does not have; {INSTALL}, or set "
                "spec.leadState.emptyDir: true"
            )
        if policy is None:
            warnings.warn(
                f"spec.leadState: fluxhop may not read MutatingAdmissionPolicies; without "
                f"{LEAD_STATE_POLICY} ({INSTALL}) rank 0's state goes with its pod",
                FluxhopWarning,
                stacklevel=2,
            )
        return spec
    why = _why_not_a_claim(kube)
    decided = spec.model_copy(deep=True)
    if why is None:
        decided.spec.lead_state = LeadState()
        return decided
    warnings.warn(
        f"rank 0 of {spec.name} keeps the instance's state in an emptyDir, which outlives a "
        f"restart of its broker but not the loss of its pod: {why}; spec.leadState chooses",
        FluxhopWarning,
        stacklevel=2,
    )
    decided.spec.lead_state = LeadState(empty_dir=True)
    return decided
