"""A TrainJob or runtime checked as the API server checks it, before use.

The API server refuses a custom resource whose parts have the wrong JSON type,
lack a required field or carry one its CRD does not declare (kubectl's strict
field validation). ``fluxhop trainer`` reads the files itself, so it applies
the same structural checks, from the type schemas in ``schemas/`` (made from
the Trainer CRDs: tests/trainer/schema_source.py), and every later step may
trust a document's shape.

Written by hand, not with jsonschema: the three rules (types, required,
unknown fields) are a short walk over a schema whose depth bounds it, the
messages must name the field path as the API server does, and jsonschema
would double the start-up of ``fluxhop trainer``.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from fluxhop.trainer.errors import TrainerError

__all__ = ["check_document", "problem_of"]

_FILES = {
    "TrainJob": "trainjob.json",
    "TrainingRuntime": "runtime.json",
    "ClusterTrainingRuntime": "runtime.json",
}
_NAMES = {
    "object": "an object (a mapping)",
    "array": "an array (a list)",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
}


_LISTED = 8  # an object with this few fields lists them when a key is unknown


@functools.cache
def _schema(kind: str) -> dict[str, Any]:
    text = resources.files("fluxhop.trainer").joinpath("schemas", _FILES[kind]).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _pattern(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


# Python type -> JSON type, in order (a bool is an int to Python; a YAML date
# is what an unquoted 2026-01-01 becomes when a document is built in Python)
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (Mapping, "object"),
    (list, "array"),
    (datetime.date, "date (quote it to make it a string)"),
)


def _type_of(value: Any) -> str:
    """The JSON type a value has, as the API server's messages name it."""
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    actual = _type_of(value)
    if schema.get("x-kubernetes-int-or-string"):
        return actual in ("integer", "string")
    wanted = schema.get("type")
    return wanted is None or actual == wanted or (wanted == "number" and actual == "integer")


def _unknown(path: str, key: Any, known: Mapping[str, Any]) -> str:
    field = f"{path}.{key}" if path else str(key)
    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    if not close and len(known) <= _LISTED:
        hint = f"; known: {', '.join(known)}"
    return f'unknown field "{field}"{hint}'


def problem_of(value: Any, schema: Mapping[str, Any], path: str = "") -> str | None:
    """The first way ``value`` breaks ``schema``, as one phrase naming its path."""
    if not _fits(value, schema):
        expected = "an integer or a string" if schema.get("x-kubernetes-int-or-string") else None
        expected = expected or _NAMES.get(str(schema.get("type")), str(schema.get("type")))
        return f"{path or 'the document'} must be {expected}, not {_type_of(value)}"
    if (
        isinstance(value, str)
        and "pattern" in schema
        and not _pattern(schema["pattern"]).match(value)
    ):
        return f"{path} is {value!r}, not a quantity (e.g. 500m, 2, 4Gi)"
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            if item is not None and (problem := problem_of(item, schema["items"], f"{path}[{i}]")):
                return problem
    if isinstance(value, Mapping):
        return _object_problem(value, schema, path)
    return None


def _object_problem(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> str | None:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if value.get(name) is None:
            return f"{path}.{name} is required" if path else f"{name} is required"
    values = schema.get("additionalProperties")
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key in properties:
            sub: Mapping[str, Any] | None = properties[key]
        elif isinstance(values, Mapping):
            sub = values
        elif properties and not schema.get("x-kubernetes-preserve-unknown-fields"):
            return _unknown(path, key, properties)
        else:
            sub = None  # kept as it is (preserve-unknown-fields, or an open object)
        if item is not None and sub is not None and (problem := problem_of(item, sub, where)):
            return problem  # a null is dropped, as the API server drops it
    return None


def check_document(doc: Mapping[str, Any]) -> None:
    """Refuse a TrainJob or (Cluster)TrainingRuntime of the wrong shape in one line."""
    kind = doc.get("kind")
    if kind not in _FILES:
        raise TrainerError(f"kind {kind!r} is not a TrainJob or a training runtime")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    problem = problem_of(doc, _schema(str(kind)))
    if problem:
        raise TrainerError(
            f"{kind} {name}: {problem}" if isinstance(name, str) else f"{kind}: {problem}"
        )
