"""``spec.leadState`` (a fluxhop extension): where rank 0 keeps the instance's
state, so that losing its pod does not lose the queue.

Rank 0's broker keeps its content store and statedir (``-Sstatedir``) on
this volume. When its pod is lost (deleted, evicted, its node gone), the
Job makes a new rank 0 that restarts the instance from that state: the
jobs that were pending still are, the history is whole, and a job that was
running ends with an exception saying why. The workers rejoin by themselves
(render/templates/entrypoint.sh has the steps). Only for an interactive
MiniCluster: a batch one has its command for a queue, and a new rank 0 would
run the command again.

The volume is a PersistentVolumeClaim: ``claimName`` names one that exists,
otherwise fluxhop makes ``<name>-lead-state`` of ``storageClassName`` (the
cluster's default class when unset) and ``size``, and it goes with the
MiniCluster. Only rank 0's pod mounts it, so ReadWriteOnce serves: all ranks
share one pod template, and the MutatingAdmissionPolicy in
deploy/lead-state.yaml adds the claim to the pod of completion index 0 as it
is created (render/pod.py marks the template for it).

``emptyDir: true`` keeps the state in an emptyDir instead: it outlives a
restart of rank 0's broker in its pod, not the loss of the pod. fluxhop
chooses for an interactive MiniCluster that says nothing: a claim of the
default StorageClass where the cluster has one and the policy, else an
emptyDir, with a warning (cluster/lead_volume.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from fluxhop.errors import InputError
from fluxhop.spec.model import Model
from fluxhop.spec.quantity import parse_quantity
from fluxhop.spec.rules import DnsSubdomain

__all__ = [
    "DEFAULT_CHECKPOINT",
    "DEFAULT_STATE_SIZE",
    "LEAD_STATE_ANNOTATIONS",
    "LEAD_STATE_DIR",
    "LeadState",
    "made_claim_name",
    "parse_lead_state",
]

DEFAULT_STATE_SIZE = "1Gi"
LEAD_STATE_DIR = "/var/lib/fluxhop/lead"  # where rank 0's container has the volume
# the prefix of the pod template's annotations for the policy that mounts the
# claim (render/pod.py): fluxhop's, never a user's
LEAD_STATE_ANNOTATIONS = "fluxhop.io/lead-state-"
# How often rank 0's KVS is written to the volume when it changed (Flux's
# kvs.checkpoint-period): what a lost node (no chance to save) may lose.
DEFAULT_CHECKPOINT = 1


def made_claim_name(minicluster: str) -> str:
    """The claim fluxhop makes for MiniCluster ``minicluster``."""
    return f"{minicluster}-lead-state"


class LeadState(Model):
    claim_name: DnsSubdomain | None = None  # an existing PVC; else fluxhop makes one
    storage_class_name: DnsSubdomain | None = None  # of fluxhop's PVC; None: the default class
    size: str = DEFAULT_STATE_SIZE  # of fluxhop's PVC
    checkpoint_seconds: int = Field(DEFAULT_CHECKPOINT, ge=1, le=3600)
    empty_dir: bool = False  # keep it in the pod: outlives the broker, not the pod

    @model_validator(mode="after")
    def _one_volume(self) -> LeadState:
        if self.empty_dir and (self.claim_name or self.storage_class_name):
            given = "claimName" if self.claim_name else "storageClassName"
            raise ValueError(
                f"emptyDir keeps the state in the pod, {given} on a claim; give one of them"
            )
        return self

    @field_validator("size")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if parse_quantity(value) <= 0:
            raise ValueError(f"is {value}; give the claim's size, e.g. {DEFAULT_STATE_SIZE}")
        return value

    @property
    def made_by_fluxhop(self) -> bool:
        """fluxhop makes the claim (not an emptyDir, not one the user names)."""
        return not self.empty_dir and self.claim_name is None

    def claim_of(self, minicluster: str) -> str | None:
        """The claim rank 0 of MiniCluster ``minicluster`` mounts, None for an emptyDir."""
        if self.empty_dir:
            return None
        return self.claim_name or made_claim_name(minicluster)


# --lead-state's keys and the spec.leadState fields they set
_FLAG_KEYS = {"claim": "claimName", "class": "storageClassName", "size": "size",
              "checkpoint": "checkpointSeconds"}  # fmt: skip
_FLAG_EXAMPLE = "e.g. --lead-state emptyDir, or --lead-state claim,class=fast,size=5Gi"


def parse_lead_state(value: str) -> dict[str, Any]:
    """--lead-state's value as the spec.leadState it stands for: ``emptyDir``;
    or ``claim`` (a claim fluxhop makes), ``claim=NAME`` (yours),
    ``class=NAME``, ``size=QTY`` and ``checkpoint=SECONDS``, joined by commas.
    The values are the model's to check; this checks the words."""
    if value.strip().lower() == "emptydir":
        return {"emptyDir": True}
    state: dict[str, Any] = {}
    seen: set[str] = set()
    for item in value.split(","):
        key, sep, given = (part.strip() for part in item.partition("="))
        key = key.lower()
        if key == "emptydir":
            raise InputError(
                f"--lead-state {value!r}: emptyDir takes nothing else; {_FLAG_EXAMPLE}"
            )
        if key not in _FLAG_KEYS or (sep and not given) or (not sep and key != "claim"):
            raise InputError(
                f"--lead-state {value!r}: {item.strip() or 'an empty item'} is not one of "
                f"emptyDir, claim, claim=NAME, class=NAME, size=QTY, checkpoint=SECONDS; "
                f"{_FLAG_EXAMPLE}"
            )
        if key in seen:
            raise InputError(f"--lead-state {value!r}: {key} is given twice; give it once")
        seen.add(key)
        if sep:
            whole = key == "checkpoint" and given.lstrip("-").isdigit()
            state[_FLAG_KEYS[key]] = int(given) if whole else given
    if "claimName" in state and {"storageClassName", "size"} & state.keys():
        raise InputError(
            f"--lead-state {value!r}: class and size are of the claim fluxhop makes, and "
            "claim=NAME is one you made; drop one"
        )
    return state
