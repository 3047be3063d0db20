"""``spec.autoscale`` (a fluxhop extension): the MiniCluster is sized to its
Flux queue between ``minSize`` (or 1) and ``maxSize`` - grown when pending
jobs cannot start for want of nodes, shrunk, drained first, when nodes stay
idle past ``scaleDownDelaySeconds`` (workload/autoscale.py has the policy;
fluxhop's operator and ``fluxhop autoscale`` apply it)."""

from __future__ import annotations

from pydantic import Field

from fluxhop.flux.limits import MAX_SECONDS
from fluxhop.spec.model import Model

__all__ = ["DEFAULT_DELAY", "AutoscaleSpec"]

DEFAULT_DELAY = 300


class AutoscaleSpec(Model):
    scale_down_delay_seconds: int = Field(DEFAULT_DELAY, ge=0, le=MAX_SECONDS)
