"""Security contexts of a MiniCluster's pods and containers.

Defaults that cost a job nothing: the pod runs under the container runtime's
default seccomp profile (``RuntimeDefault``) unless the spec names one, and a
non-root pod gets an fsGroup so that its user can read the CURVE Secret.
The ``restricted`` profile (spec.pod.securityProfile) adds what the Pod
Security Standards "restricted" level asks: a non-root user and group, no
privilege escalation, every capability dropped (spec/security.py refuses
what cannot be made to pass).

One cost of RuntimeDefault is real and handled here: containerd's and
CRI-O's default profiles allow ``process_vm_readv``/``process_vm_writev``
only to a container with CAP_SYS_PTRACE, so MPI's single-copy shared-memory
transfer (Linux CMA) fails with EPERM in the middle of a job. Where fluxhop
chose the profile, it turns CMA off for Open MPI (which otherwise uses it by
default); a spec that sets its own seccomp profile or adds SYS_PTRACE is
left as it is.
"""

from __future__ import annotations

from typing import Any

from fluxhop.spec.minicluster import MiniCluster, SecurityContext

__all__ = [
    "CMA_OFF",
    "RESTRICTED_ID",
    "cma_environment",
    "container_security_context",
    "pod_security_context",
    "restricted",
]

RUNTIME_DEFAULT = {"type": "RuntimeDefault"}
RESTRICTED_ID = 1000  # user and group of a restricted pod that names none
# Open MPI 4 (btl/vader) and 5 (smsc/cma): copy through shared memory instead.
CMA_OFF = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_smsc": "^cma"}


def restricted(spec: MiniCluster) -> bool:
    return spec.spec.pod.security_profile == "restricted"


def _lead_user(spec: MiniCluster, context: dict[str, Any]) -> tuple[Any, Any]:
    lead = spec.spec.flux_container.security_context
    user = lead.run_as_user if lead and lead.run_as_user is not None else context.get("runAsUser")
    group = (
        lead.run_as_group if lead and lead.run_as_group is not None else context.get("runAsGroup")
    )
    return user, group


def pod_security_context(spec: MiniCluster) -> dict[str, Any]:
    pod = spec.spec.pod.security_context
    context = pod.wire() if pod else {}
    if restricted(spec):
        context.setdefault("runAsNonRoot", True)
        user, group = _lead_user(spec, context)
        if user is None:
            context["runAsUser"] = RESTRICTED_ID
        if group is None:  # not the image's group, which is often root's
            context["runAsGroup"] = RESTRICTED_ID if user is None else user
    user, group = _lead_user(spec, context)
    if user not in (None, 0) and "fsGroup" not in context:
        context["fsGroup"] = group if group not in (None, 0) else user
    context.setdefault("seccompProfile", dict(RUNTIME_DEFAULT))
    return context


def container_security_context(
    spec: MiniCluster, context: SecurityContext | None
) -> dict[str, Any] | None:
    out = context.wire() if context else {}
    if restricted(spec):
        out.setdefault("allowPrivilegeEscalation", False)
        capabilities = dict(out.get("capabilities") or {})
        capabilities["drop"] = ["ALL"]
        out["capabilities"] = capabilities
    return out or None


def cma_environment(spec: MiniCluster) -> dict[str, str]:
    """Environment that turns MPI's CMA off where fluxhop chose RuntimeDefault."""
    pod = spec.spec.pod.security_context
    lead = spec.spec.flux_container
    own = lead.security_context
    if (pod and pod.seccomp_profile) or (own and own.seccomp_profile):
        return {}
    if own and own.capabilities and {"SYS_PTRACE", "CAP_SYS_PTRACE"} & set(own.capabilities.add):
        return {}
    return {key: value for key, value in CMA_OFF.items() if key not in lead.environment}
