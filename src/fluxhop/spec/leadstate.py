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
MiniCluster. Every pod of the MiniCluster mounts it (they share one pod
template; only rank 0 writes), so it must be mountable on every node they
run on: fluxhop's claim asks for ReadWriteMany.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from fluxhop.spec.model import Model
from fluxhop.spec.quantity import parse_quantity
from fluxhop.spec.rules import DnsSubdomain

__all__ = ["DEFAULT_CHECKPOINT", "DEFAULT_STATE_SIZE", "LeadState"]

DEFAULT_STATE_SIZE = "1Gi"
# How often rank 0's KVS is written to the volume when it changed (Flux's
# kvs.checkpoint-period): what a lost node (no chance to save) may lose.
DEFAULT_CHECKPOINT = 1


class LeadState(Model):
    claim_name: DnsSubdomain | None = None  # an existing PVC; else fluxhop makes one
    storage_class_name: DnsSubdomain | None = None  # of fluxhop's PVC; None: the default class
    size: str = DEFAULT_STATE_SIZE  # of fluxhop's PVC
    checkpoint_seconds: int = Field(DEFAULT_CHECKPOINT, ge=1, le=3600)

    @field_validator("size")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if parse_quantity(value) <= 0:
            raise ValueError(f"is {value}; give the claim's size, e.g. {DEFAULT_STATE_SIZE}")
        return value

    @property
    def made_by_fluxhop(self) -> bool:
        return self.claim_name is None
