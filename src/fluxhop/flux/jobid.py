"""Flux job IDs in F58 (RFC 19): base 58 with a leading ``ƒ`` (``f`` when
ASCII is asked for), as ``flux jobs`` prints them. ``flux jobs --json`` gives
the integer; this turns it into what a user types. Written by hand: flux-core's
Python ``JobID`` needs its C library."""

from __future__ import annotations

from fluxhop.arguments import checked
from fluxhop.errors import InputError

__all__ = ["f58", "parse"]

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_VALUE = {c: i for i, c in enumerate(_ALPHABET)}
_MAX = 2**64 - 1


@checked
def f58(jobid: int, *, ascii: bool = True) -> str:
    if not 0 <= jobid <= _MAX:
        raise InputError(f"job ID {jobid} is not a 64-bit unsigned integer")
    digits = ""
    while True:
        jobid, rest = divmod(jobid, 58)
        digits = _ALPHABET[rest] + digits
        if jobid == 0:
            break
    return ("f" if ascii else "ƒ") + digits


@checked
def parse(text: str) -> int:
    """A job ID in F58 (``ƒ``/``f`` prefix) or decimal, as an integer."""
    value = text.strip()
    if value[:1] in ("ƒ", "f") and len(value) > 1:
        total = 0
        for char in value[1:]:
            if char not in _VALUE:
                raise InputError(f"job ID {text!r} is not F58 (ƒ or f, then base-58 digits)")
            total = total * 58 + _VALUE[char]
    elif value.isdigit():
        total = int(value)
    else:
        raise InputError(f"job ID {text!r} is neither F58 (e.g. fEYkSMn) nor a decimal number")
    if total > _MAX:
        raise InputError(f"job ID {text!r} does not fit in 64 bits")
    return total
