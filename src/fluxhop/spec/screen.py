"""Screening of raw MiniCluster documents before pydantic sees them.

These kinds of keys exist at every level of the model:

* supported keys, validated by the pydantic model;
* keys fluxhop knows but does not support (Flux Operator features it does not
  implement, legacy v1alpha1 fields, server-populated metadata): dropped with
  one warning line each, so existing files still load;
* old spellings a model converts itself (``TRANSLATED``): passed through;
* v1alpha1 fields that would change what runs (``V1ALPHA1``): an error that
  names what the field became in v1alpha2;
* anything else: an error naming the key and the closest valid name.

Pydantic errors are turned into the same one-line form:
``spec.containers[0].image: <problem>``.
"""

from __future__ import annotations

import json
import types
import typing
import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from fluxhop.errors import SHOWN, FluxhopWarning, SpecError, clipped

__all__ = ["format_path", "in_terms", "screen", "spec_error"]


def format_path(loc: typing.Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)  # a key the user wrote: cut short when huge
            text = text if len(text) <= SHOWN else text[:SHOWN] + "..."
            out += f".{text}" if out else text
    return out


def in_terms(message: str, names: typing.Iterable[tuple[str, str]]) -> str:
    """``message`` with the field path it starts with written as the user wrote
    it - a flag (``--image``), a jobspec attribute (``rabbit.mpi.image``) - so
    that an error names what the user typed, not a spec path they never wrote.

    The first ``(path, name)`` whose path begins the message wins (list longer
    paths first); ``path=value`` and ``path.key`` become ``name value`` and
    ``name key``. A message that starts with none of the paths is returned as
    it is."""
    for path, name in names:
        rest = message.removeprefix(path)
        if rest == message or rest[:1] not in ("", ":", "=", ".", " ", "["):
            continue
        return name + (" " + rest[1:] if rest[:1] in ("=", ".") else rest)
    return message


def _aliases(model: type[BaseModel]) -> dict[str, Any]:
    """Wire name -> annotation of every field of ``model``."""
    return {(field.alias or name): field.annotation for name, field in model.model_fields.items()}


def _model_in(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """("one" | "list" | "dict", Model) when the annotation holds a model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "one", annotation
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            found = _model_in(arg)
            if found:
                return found
    if origin in (list, tuple) and args:
        inner = _model_in(args[0])
        if inner and inner[0] == "one":
            return "list", inner[1]
    if origin in (dict, Mapping) and len(args) == 2:
        inner = _model_in(args[1])
        if inner and inner[0] == "one":
            return "dict", inner[1]
    return None


Dropped = list[tuple[tuple[Any, ...], Any, str]]  # (path, value, reason)


def screen(
    data: Any, model: type[BaseModel], path: tuple[Any, ...] = (), dropped: Dropped | None = None
) -> Any:
    """Return a copy of ``data`` without known-unsupported keys; warn for each
    (and record it with its path in ``dropped``); raise :class:`SpecError` for
    unknown keys."""
    if not isinstance(data, Mapping):
        return data
    fields = _aliases(model)
    unsupported: Mapping[str, str] = getattr(model, "UNSUPPORTED", {})
    translated: frozenset[str] = getattr(model, "TRANSLATED", frozenset())
    v1alpha1: Mapping[str, str] = getattr(model, "V1ALPHA1", {})
    cleaned: dict[str, Any] = {}
    for key, value in data.items():
        where = format_path((*path, key))
        if key in fields:
            cleaned[key] = _screen_value(value, fields[key], (*path, key), dropped)
        elif key in translated:  # an old spelling the model itself converts
            cleaned[key] = value
        elif key in v1alpha1:
            raise SpecError(
                f"{where} is a Flux Operator v1alpha1 field; in v1alpha2 it {v1alpha1[key]}"
            )
        elif key in unsupported:
            # false (what the CRD defaults such a switch to) or null asks for nothing
            if value is not False and value is not None:
                warnings.warn(
                    f"{where} is ignored: {unsupported[key]}", FluxhopWarning, stacklevel=2
                )
            if dropped is not None:
                dropped.append(((*path, key), value, unsupported[key]))
        else:
            import difflib  # only for a misspelt key: render of a good file never needs it

            close = difflib.get_close_matches(str(key), [*fields, *unsupported], n=1, cutoff=0.6)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; valid keys: {', '.join(sorted(fields))}"
            )
            raise SpecError(f"{where}: unknown field{hint}")
    return cleaned


def _screen_value(
    value: Any, annotation: Any, path: tuple[Any, ...], dropped: Dropped | None
) -> Any:
    found = _model_in(annotation)
    if not found or value is None:
        return value
    kind, model = found
    if kind == "one":
        return screen(value, model, path, dropped)
    if kind == "list" and isinstance(value, list):
        return [screen(item, model, (*path, i), dropped) for i, item in enumerate(value)]
    if kind == "dict" and isinstance(value, Mapping):
        return {k: screen(v, model, (*path, k), dropped) for k, v in value.items()}
    return value


# pydantic's wording for a wrong type, in the words of a YAML user
_PLAIN = {
    "model_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "bool_type": "must be true or false",
    "float_type": "must be a number",
}


def spec_error(err: ValidationError) -> SpecError:
    """The first pydantic error as one line: ``path: problem``."""
    first = err.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    if loc[-1:] == ("[key]",):  # a bad mapping key: the message quotes the key
        loc = loc[:-2]
    path = format_path(loc)
    message = first["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if first["type"] in _PLAIN:
        message = _PLAIN[first["type"]]
    if first["type"] == "string_type" and isinstance(first.get("input"), (bool, int, float)):
        value = first["input"]
        # YAML reads more as numbers than people expect (1e3, 08, y), and so does kubectl
        read = json.dumps(value) if isinstance(value, bool) else f"the number {value!r}"
        message = f"must be a string, not {read}; quote it in the YAML"
    if first["type"] == "missing":
        message = "is required"
    elif first["type"] == "extra_forbidden":
        message = "unknown field"
    # clipped: a validator elsewhere may quote a huge value whole
    return SpecError(clipped(f"{path}: {message}" if path else message))
