"""Nested data bounded at the door: :func:`check_data` refuses mappings and
lists nested deeper than :data:`fluxhop.documents.MAX_DEPTH` levels, the bound
every document read from a file already has, without recursion - so deeply
nested input given to the Python API is refused in one line before anything
recursive (``copy.deepcopy``, ``json.dumps``, a validator) meets it.
:func:`check_json_text` does the same for JSON text, before ``json.loads``.
"""

from __future__ import annotations

import collections.abc as abc
import re
from collections.abc import Iterator
from typing import Any

from fluxhop.documents import MAX_DEPTH
from fluxhop.errors import InputError

__all__ = ["check_data", "check_json_text", "short_repr", "type_name"]


def type_name(value: Any) -> str:
    """A value's type as a message names it."""
    return "None" if value is None else type(value).__name__


def short_repr(key: Any) -> str:
    """A key for a one-line message: its repr, cut short when huge."""
    text = repr(key)
    return text if len(text) <= 60 else f"{text[:60]}..."


_JSON_SCALARS = (str, int, float, bool, type(None))


def _path(keys: list[Any]) -> str:
    out = ""
    for key in keys:
        text = str(key) if len(str(key)) <= 60 else f"{str(key)[:60]}..."
        out += f"[{key}]" if isinstance(key, int) else (f".{text}" if out else text)
    return out


def _children(value: Any) -> tuple[Iterator[tuple[Any, Any]], bool] | None:
    """(its (key, value) pairs, whether it is a mapping), or None for a scalar."""
    if isinstance(value, abc.Mapping):
        return iter(value.items()), True
    if isinstance(value, (list, tuple)):
        return enumerate(value), False
    return None


def check_data(
    value: Any,
    what: str,
    *,
    error: type[Exception] = InputError,
    json: bool = False,
    limit: int = MAX_DEPTH,
) -> None:
    """Refuse ``value`` (mappings and lists inside each other) when it nests
    deeper than ``limit`` levels - counted as the document reader counts them,
    so whatever a file may hold passes - with ``error("<what> is nested deeper
    than <limit> levels")``. With ``json=True`` it must also hold only what
    JSON can: strings, numbers, booleans, null, lists and string-keyed
    mappings. Iterative: a value shared or referring to itself costs little."""
    root = _children(value)
    if root is None:
        if json and not isinstance(value, _JSON_SCALARS):
            raise error(f"{what} is {type_name(value)}, which is not a JSON value")
        return
    deepest: dict[int, int] = {id(value): 1}  # container -> deepest level walked at
    stack: list[tuple[Iterator[tuple[Any, Any]], bool, Any]] = [(*root, None)]
    while stack:
        pairs, mapping, _ = stack[-1]
        step = next(pairs, None)
        if step is None:
            stack.pop()
            continue
        key, child = step
        depth = len(stack) + 1
        if depth > limit:
            raise error(f"{what} is nested deeper than {limit} levels")
        if json and mapping and not isinstance(key, str):
            where = _path([frame[2] for frame in stack[1:]])
            raise error(
                f"{what} {where or 'top level'}: key {short_repr(key)} is {type_name(key)}; "
                "JSON keys are strings"
            )
        below = _children(child)
        if below is None:
            if json and not isinstance(child, _JSON_SCALARS):
                where = _path([frame[2] for frame in stack[1:]] + [key])
                raise error(
                    f"{what} {where}: {type_name(child)} is not a JSON value "
                    "(strings, numbers, booleans, null, lists and mappings are)"
                )
            continue
        if deepest.get(id(child), 0) >= depth:
            continue  # walked already at this depth or deeper
        deepest[id(child)] = depth
        stack.append((*below, key))


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")


def check_json_text(
    text: str, what: str, *, error: type[Exception] = InputError, limit: int = MAX_DEPTH
) -> None:
    """Refuse JSON text whose arrays and objects nest deeper than ``limit``,
    before ``json.loads`` (which recurses) reads it."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if brackets.count("[") + brackets.count("{") <= limit:
        return
    depth = 0
    for char in brackets:
        depth += 1 if char in "[{" else -1
        if depth > limit:
            raise error(f"{what} is nested deeper than {limit} levels")
