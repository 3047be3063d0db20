"""What the operator keeps between events, per MiniCluster (namespace,
name): what the pod watch saw of rank 0, and what the timers' looks
(operator/timers.py) need from one look to the next. Forgotten when rank
0's pod goes, so that deleted MiniClusters leave nothing behind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluxhop.operator.resource import AUTOSCALE_STATUS

__all__ = [
    "Remembered", "forget", "health_written", "leads", "remembered", "unwaited", "versions",
    "wait_for_change",
]  # fmt: skip

Key = tuple[str, str]

# Rank 0's pod of each MiniCluster, as the pod watch last saw it: the
# autoscaler's timer finds it here, without a request.
leads: dict[Key, dict[str, Any]] = {}
# The version of each autoscaled MiniCluster's queue the last look saw, and
# how long a look waits at rank 0 for it to move (the exporter's long poll).
versions: dict[Key, str | None] = {}
wait_for_change = 10.0
unwaited: dict[Key, float] = {}  # when each look without a long poll was


@dataclass(frozen=True)
class Remembered:
    """What this operator last wrote for a resource, until its watch brings
    it: a look reads kopf's live body (no GET), which may lag behind."""

    uid: str | None
    generation: int
    status: dict[str, Any] | None

    def outran(self, body: dict[str, Any]) -> bool:
        return int(body["metadata"].get("generation", 0)) < self.generation

    def ahead_of(self, body: dict[str, Any]) -> bool:
        """Whether this knows more than ``body`` (the same resource, its own
        writes not all in it yet); once not, the body is the truth again."""
        if self.uid != body["metadata"].get("uid"):
            return False
        written = (body.get("status") or {}).get(AUTOSCALE_STATUS)
        return self.outran(body) or (self.status is not None and written != self.status)

    @classmethod
    def after(cls, body: dict[str, Any], tick: Any, before: Remembered | None) -> Remembered:
        floor = before.generation if before else 0
        seen = int(body["metadata"].get("generation", 0))
        return cls(body["metadata"].get("uid"), max(tick.generation or 0, seen, floor),
                   tick.status)  # fmt: skip


remembered: dict[Key, Remembered] = {}
# status.health as this operator last wrote it (with the resource's uid):
# kopf's body may not have brought the write yet, and its events are said once
health_written: dict[Key, tuple[str | None, dict[str, Any]]] = {}


def forget(key: Key) -> None:
    """Rank 0 gone (a restart, or the MiniCluster deleted): what the looks
    kept for it goes too."""
    leads.pop(key, None)
    versions.pop(key, None)
    remembered.pop(key, None)
    unwaited.pop(key, None)
