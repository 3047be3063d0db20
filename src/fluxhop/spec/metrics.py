"""``spec.metrics`` (a fluxhop extension): the lead broker's pod serves
Prometheus metrics read from Flux itself (render/templates/metrics.py) on a
port named ``metrics``, and the NetworkPolicy lets only the MiniCluster's own
namespace and the namespaces named here reach it.

Unset, it is on for a MiniCluster that stays up - interactive ones, and
every one fluxhop's operator reconciles - and off for a run, whose instance
ends with its command (docs/guides/metrics.md).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from fluxhop.spec.model import Model
from fluxhop.spec.rules import DnsLabel

__all__ = ["BROKER_PORT", "DEFAULT_PORT", "MetricsSpec"]

BROKER_PORT = 8050  # the brokers' own (render/bundle.py listens there)
DEFAULT_PORT = 9408


class MetricsSpec(Model):
    enabled: bool | None = None  # None: on when interactive or operated
    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    namespaces: list[DnsLabel] = Field(default=[])  # may scrape, besides its own

    @field_validator("port")
    @classmethod
    def _not_the_brokers(cls, value: int) -> int:
        if value == BROKER_PORT:
            raise ValueError(f"is {value}, the Flux brokers' port; choose another")
        return value

    def serves(self, *, interactive: bool) -> bool:
        return self.enabled if self.enabled is not None else interactive
