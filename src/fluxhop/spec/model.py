"""The base of every MiniCluster model class, and the notes its fields share."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
)
from pydantic.alias_generators import to_camel

__all__ = ["LEGACY", "OPERATOR", "Model"]

LEGACY = "it is a v1alpha1 field that the v1alpha2 API server prunes"
OPERATOR = " (--target minicluster passes it on to the Flux Operator)"


class Model(BaseModel):
    """Base: camelCase on the wire, no stray keys, mutable for builders."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_assignment=True,
        defer_build=True,
        strict=True,
    )
    UNSUPPORTED: ClassVar[dict[str, str]] = {}
    # v1alpha1 fields that are an error here, each with what it became (legacy.py)
    V1ALPHA1: ClassVar[dict[str, str]] = {}

    def wire(self) -> dict[str, Any]:
        """The camelCase dict of the fields that were set or differ from defaults."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
