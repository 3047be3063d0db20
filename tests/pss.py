"""The Kubernetes Pod Security Standards (baseline and restricted, as the
Pod Security admission controller of Kubernetes 1.33 checks them), written out
as a test helper: ``violations(pod_spec, level)`` lists every rule a pod
breaks, as "rule: where".

The rules follow kubernetes.io/docs/concepts/security/pod-security-standards;
each function below is one row of its tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["BASELINE_CAPABILITIES", "pod_specs", "violations"]

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)


def _containers(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for container in pod.get(group) or []:
            yield f"{group}[{container.get('name')}]", container


def _context(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _baseline(pod: dict[str, Any], meta: dict[str, Any]) -> Iterator[str]:
    pod_context = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            yield f"host namespaces: {field}"
    if (pod_context.get("windowsOptions") or {}).get("hostProcess"):
        yield "HostProcess: pod"
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            yield f"hostPath volumes: {volume['name']}"
    if (pod_context.get("seccompProfile") or {}).get("type") == "Unconfined":
        yield "seccomp: pod Unconfined"
    if (pod_context.get("appArmorProfile") or {}).get("type") == "Unconfined":
        yield "AppArmor: pod unconfined"
    yield from _selinux("pod", pod_context)
    for sysctl in pod_context.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"sysctls: {sysctl.get('name')}"
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            yield f"AppArmor: annotation {key}"
    for where, container in _containers(pod):
        context = _context(container)
        if context.get("privileged"):
            yield f"privileged containers: {where}"
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            yield f"HostProcess: {where}"
        added = set((context.get("capabilities") or {}).get("add") or [])
        for capability in sorted(added - BASELINE_CAPABILITIES):
            yield f"capabilities: {where} adds {capability}"
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                yield f"host ports: {where} {port['hostPort']}"
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"seccomp: {where} Unconfined"
        if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
            yield f"AppArmor: {where} unconfined"
        if context.get("procMount") not in (None, "Default"):
            yield f"/proc mount type: {where}"
        yield from _selinux(where, context)


def _selinux(where: str, context: dict[str, Any]) -> Iterator[str]:
    options = context.get("seLinuxOptions") or {}
    if options.get("type", "") not in SELINUX_TYPES:
        yield f"SELinux: {where} type {options['type']}"
    for field in ("user", "role"):
        if options.get(field):
            yield f"SELinux: {where} sets {field}"


def _restricted(pod: dict[str, Any]) -> Iterator[str]:
    pod_context = pod.get("securityContext") or {}
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            yield f"volume types: {volume['name']} is {', '.join(sorted(kinds))}"
    if pod_context.get("runAsUser") == 0:
        yield "running as non-root user: pod runAsUser 0"
    pod_seccomp = (pod_context.get("seccompProfile") or {}).get("type")
    for where, container in _containers(pod):
        context = _context(container)
        if context.get("allowPrivilegeEscalation") is not False:
            yield f"privilege escalation: {where} does not set allowPrivilegeEscalation false"
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        if non_root is not True:
            yield f"running as non-root: {where}"
        if context.get("runAsUser") == 0:
            yield f"running as non-root user: {where} runAsUser 0"
        seccomp = (context.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            yield f"seccomp: {where} has no RuntimeDefault or Localhost profile"
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"capabilities: {where} does not drop ALL"
        for capability in sorted(set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}):
            yield f"capabilities: {where} adds {capability} (restricted)"


def violations(template: dict[str, Any], level: str = "baseline") -> list[str]:
    """The rules of ``level`` a pod template ({metadata, spec}) breaks."""
    pod, meta = template.get("spec") or {}, template.get("metadata") or {}
    found = list(_baseline(pod, meta))
    if level == "restricted":
        found += list(_restricted(pod))
    elif level != "baseline":
        raise ValueError(f"unknown level {level!r}")
    return found


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every pod template in rendered objects: Jobs, JobSets (each replicated
    Job) and bare Pods, as (where, {metadata, spec})."""
    found = []
    for obj in objects:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if obj.get("kind") == "Job":
            found.append((name, obj["spec"]["template"]))
        elif obj.get("kind") == "JobSet":
            for job in obj["spec"]["replicatedJobs"]:
                found.append((f"{name}/{job['name']}", job["template"]["spec"]["template"]))
        elif obj.get("kind") == "Pod":
            found.append((name, {"metadata": obj.get("metadata", {}), "spec": obj["spec"]}))
    return found
