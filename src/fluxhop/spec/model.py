"""The base of every MiniCluster model class, and the notes its fields share."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
)
from pydantic.alias_generators import to_camel

from fluxhop.errors import SpecError
from fluxhop.nesting import check_data
from fluxhop.spec.screen import spec_error

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

    def __init__(self, /, **data: Any) -> None:
        """Build from keyword arguments; a wrong value is one :class:`SpecError`
        line (``Container: image: must be a string``), as a file's would be."""
        check_data(data, type(self).__name__, error=SpecError)
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise SpecError(f"{type(self).__name__}: {spec_error(err)}") from None

    # pydantic calls a model's own __init__ while it validates nested data
    # (custom_init) unless the init is marked as its base one, as RootModel's
    # is: validating a document never comes here, only a call in Python does.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as err:
            raise SpecError(f"{type(self).__name__}: {spec_error(err)}") from None

    def wire(self) -> dict[str, Any]:
        """The camelCase dict of the fields that were set or differ from defaults."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
