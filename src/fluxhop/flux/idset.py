"""RFC 22 idsets: sets of non-negative integers such as ``0-3,7``.

Unlike a hostlist, an idset is a *set*: ids are unique and written in strictly
ascending order, with no leading zeros. Decoding is strict (it is what R's
``rank``/``core``/``gpu`` fields and broker quorum values must satisfy);
encoding sorts and de-duplicates. Flux writes idsets with ranges and without
brackets everywhere in R, which is the default here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fluxhop.arguments import checked
from fluxhop.errors import IdsetError

__all__ = ["MAX_DECODE", "count", "decode", "encode", "runs"]

_MAX_ID = (1 << 32) - 2  # flux-core stores ids as unsigned int; UINT_MAX is "invalid"
# decode() refuses to expand more ids than this (count() and runs() never expand):
# an idset of 20 characters can name four billion ids.
MAX_DECODE = 1 << 20
_TERM_RE = re.compile(r"(0|[1-9][0-9]*)(?:-(0|[1-9][0-9]*))?")


def _show(text: str) -> str:
    """Quote user input for a one-line error, shortened if it is huge."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _ranges(text: str) -> list[tuple[int, int]]:
    if not isinstance(text, str):
        raise IdsetError(f"an idset must be a string, not {type(text).__name__}")
    body = text
    if body.startswith("[") or body.endswith("]"):
        if not (body.startswith("[") and body.endswith("]")) or len(body) < 2:
            raise IdsetError(f"invalid idset {_show(text)}: unbalanced brackets")
        body = body[1:-1]
    if body == "":
        return []
    ranges: list[tuple[int, int]] = []
    previous = -1
    for term in body.split(","):
        match = _TERM_RE.fullmatch(term)
        if not match:
            raise IdsetError(
                f"invalid idset {_show(text)}: {_show(term)} is not an id or an id range "
                "(ids are decimal, without leading zeros)"
            )
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise IdsetError(f"invalid idset {_show(text)}: range {_show(term)} runs backwards")
        if hi > _MAX_ID:
            raise IdsetError(f"invalid idset {_show(text)}: id {hi} is too large")
        if lo <= previous:
            raise IdsetError(
                f"invalid idset {_show(text)}: ids must be unique and ascending ({_show(term)})"
            )
        ranges.append((lo, hi))
        previous = hi
    return ranges


@checked
def runs(text: str) -> list[tuple[int, int]]:
    """The idset as ascending inclusive ``(lo, hi)`` runs, without expanding it.

    >>> runs("1,7-9")
    [(1, 1), (7, 9)]
    """
    return _ranges(text)


@checked
def decode(text: str, *, limit: int = MAX_DECODE) -> list[int]:
    """Decode an idset string into a sorted list of ids (at most ``limit``).

    >>> decode("1,7-9")
    [1, 7, 8, 9]
    """
    ranges = _ranges(text)
    total = sum(hi - lo + 1 for lo, hi in ranges)
    if total > limit:
        raise IdsetError(
            f"idset {_show(text)} holds {total} ids, more than the {limit} fluxhop expands"
        )
    ids: list[int] = []
    for lo, hi in ranges:
        ids.extend(range(lo, hi + 1))
    return ids


@checked
def count(text: str) -> int:
    """Number of ids in an idset string, without expanding it."""
    return sum(hi - lo + 1 for lo, hi in _ranges(text))


def _check_ids(ids: Iterable[int]) -> list[int]:
    values = set()
    for value in ids:
        if isinstance(value, bool) or not isinstance(value, int):
            raise IdsetError(f"idset members must be integers, not {value!r}")
        if value < 0 or value > _MAX_ID:
            raise IdsetError(f"idset member {value} is out of range 0..{_MAX_ID}")
        values.add(value)
    return sorted(values)


@checked
def encode(ids: Iterable[int], *, ranges: bool = True, brackets: bool = False) -> str:
    """Encode ids as an idset string.

    ``ranges`` compresses runs (``7-9``), as Flux does everywhere in R;
    ``brackets`` wraps a set of more than one id in ``[...]``.

    >>> encode([9, 7, 8, 1])
    '1,7-9'
    """
    members = _check_ids(ids)
    parts: list[str] = []
    i = 0
    while i < len(members):
        j = i
        if ranges:
            while j + 1 < len(members) and members[j + 1] == members[j] + 1:
                j += 1
        if j > i:
            parts.append(f"{members[i]}-{members[j]}")
        else:
            parts.append(str(members[i]))
        i = j + 1
    text = ",".join(parts)
    if brackets and len(members) > 1:
        text = f"[{text}]"
    return text
