"""The pod security profile ``restricted``: what a MiniCluster must not ask
for to pass the Kubernetes Pod Security Standards "restricted" level.

fluxhop itself renders every pod of a restricted MiniCluster to pass it (see
render/security.py); this module refuses, at load and in one line, the
settings a user wrote that cannot pass, naming the way out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fluxhop.spec.minicluster import MiniClusterSpec

__all__ = ["RESTRICTED_CAPABILITIES", "restricted_problem"]

# The one capability "restricted" lets a container add.
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
_WHY = "pod.securityProfile restricted"


def _contexts(spec: MiniClusterSpec) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("flux.container", spec.flux.container.security_context)]
    for index, container in enumerate(spec.containers):
        out.append((f"containers[{index}]", container.security_context))
    return [(where, context) for where, context in out if context is not None]


def restricted_problem(spec: MiniClusterSpec) -> str | None:
    """Why ``spec`` cannot run under the restricted profile, or None."""
    pod = spec.pod
    if pod.host_ipc or pod.host_pid:
        return f"{_WHY}: pod.hostIPC and pod.hostPID share the node's namespaces; drop them"
    pod_context = pod.security_context
    if pod_context is not None:
        if pod_context.run_as_user == 0 or pod_context.run_as_non_root is False:
            return f"{_WHY}: pod.securityContext runs as root; set runAsUser to a non-zero id"
        if (pod_context.seccomp_profile or {}).get("type") == "Unconfined":
            return f"{_WHY}: pod.securityContext.seccompProfile Unconfined is not allowed; drop it"
    if any(c.host_ports for c in spec.containers):
        return f"{_WHY}: hostPorts publish ports on the node, which is not allowed; drop them"
    for where, context in _contexts(spec):
        if context.run_as_user == 0 or context.run_as_non_root is False:
            return f"{_WHY}: {where}.securityContext runs as root; set runAsUser to a non-zero id"
        if context.privileged or context.allow_privilege_escalation:
            return (
                f"{_WHY}: {where}.securityContext asks for privilege (privileged or "
                "allowPrivilegeEscalation); drop it"
            )
        added = (
            set(context.capabilities.add if context.capabilities else []) - RESTRICTED_CAPABILITIES
        )
        if added:
            return (
                f"{_WHY}: {where} adds capabilities {', '.join(sorted(added))}; only "
                "NET_BIND_SERVICE may be added"
            )
        if (context.seccomp_profile or {}).get("type") == "Unconfined":
            return f"{_WHY}: {where}.securityContext.seccompProfile Unconfined is not allowed"
    for index, container in enumerate(spec.containers):
        for name, volume in container.volumes.items():
            if volume.host_path:
                return (
                    f"{_WHY}: containers[{index}].volumes.{name} is a hostPath volume, which "
                    "is not allowed; use a persistentVolumeClaim or csi volume"
                )
    return None
