"""A MiniCluster's pod settings: placement, tolerations, security, network."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
)

from fluxhop.spec.leadstate import LEAD_STATE_ANNOTATIONS
from fluxhop.spec.model import OPERATOR, Model
from fluxhop.spec.names import check_dns_label
from fluxhop.spec.rules import DnsSubdomain, Id, Labels, LabelValue, QualifiedName

__all__ = ["EXTENSIONS", "Network", "PodSecurityContext", "PodSpec", "Toleration"]

# spec.pod fields fluxhop adds to the Flux Operator's (its CRD has no place for
# them): the minicluster target leaves them out and says so.
EXTENSIONS = ("priorityClassName", "podsPerNode", "securityProfile")


class PodSecurityContext(Model):
    """A pod's Kubernetes PodSecurityContext (the fields the CRD knows)."""

    fs_group: Id | None = None
    fs_group_change_policy: str | None = None
    run_as_group: Id | None = None
    run_as_non_root: bool | None = None
    run_as_user: Id | None = None
    se_linux_options: dict[str, str] | None = Field(None, alias="seLinuxOptions")
    seccomp_profile: dict[str, str] | None = None
    supplemental_groups: list[Id] | None = None
    sysctls: list[dict[str, str]] | None = None
    windows_options: dict[str, Any] | None = None

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class Network(Model):
    headless_name: str | None = None
    disable_affinity: bool = False

    @field_validator("headless_name")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        return check_dns_label(value, "headlessName") if value is not None else None


class Toleration(Model):
    key: QualifiedName | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class PodSpec(Model):
    annotations: dict[QualifiedName, str] = Field(default_factory=dict)
    labels: Labels = Field(default_factory=dict)
    node_selector: Labels = Field(default_factory=dict)
    node_affinity: dict[QualifiedName, list[LabelValue]] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default=[])
    service_account_name: DnsSubdomain | None = None
    automount_service_account_token: bool | None = None
    security_context: PodSecurityContext | None = None
    scheduler_name: str | None = None
    runtime_class_name: DnsSubdomain | None = None
    dns_policy: str | None = None
    host_ipc: bool = Field(False, alias="hostIPC")
    host_pid: bool = Field(False, alias="hostPID")
    # fluxhop extensions (EXTENSIONS above)
    priority_class_name: DnsSubdomain | None = None
    pods_per_node: int | None = Field(None, ge=1)  # 1: one broker per node, required
    security_profile: Literal["restricted"] | None = None  # Pod Security Standards level

    @field_validator("annotations")
    @classmethod
    def _not_fluxhops(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key.startswith(LEAD_STATE_ANNOTATIONS):
                raise ValueError(
                    f"{key} is fluxhop's (it names spec.leadState's claim for rank 0's pod); "
                    "remove it, and set spec.leadState"
                )
        return value

    UNSUPPORTED: ClassVar[dict[str, str]] = {
        "restartPolicy": "fluxhop restarts brokers inside the pod and fails the Job on a failed job"
        + OPERATOR,
        "resources": "the Flux Operator turns it into pod overhead; set containers[].resources"
        + OPERATOR,
    }
