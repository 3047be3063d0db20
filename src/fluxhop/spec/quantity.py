"""Kubernetes resource quantities (``500m``, ``2``, ``1.5``, ``4Gi``) as numbers.

Written by hand because the parsers that exist live in Kubernetes client
packages, which the pure spec layer must not import.
"""

from __future__ import annotations

import re
from decimal import Decimal

from fluxhop.errors import shown
from fluxhop.flux.limits import (
    MAX_CORES_PER_NODE,
    MAX_GPUS_PER_NODE,
    MAX_MEMORY_PER_NODE,
    MAX_QUANTITY,
)

__all__ = ["parse_quantity", "size_problem"]

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>[A-Za-z]*))"
)
_LEAST = Decimal("1e-9")  # 1n: Kubernetes rounds anything smaller up to it
_MAX = Decimal(MAX_QUANTITY)
_MAX_EXPONENT = 40  # 1e40 is already past _MAX: no need to compute 1e999999999


def parse_quantity(value: str | int | float) -> Decimal:
    """The numeric value of a quantity; raises ``ValueError`` when malformed,
    not finite, or beyond what Kubernetes holds (more than 2^63-1, or not zero
    but less than 1n)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
        if not number.is_finite():
            raise ValueError(f"{value!r} is not a quantity (it must be a finite number)")
        return _bounded(number, value)
    text = str(value).strip()
    match = _QUANTITY.fullmatch(text)
    if not match:
        raise ValueError(f"{shown(text)} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
    number = Decimal(match.group("number"))
    exponent = match.group("exponent")
    if exponent is not None:
        power = int(exponent[1:])
        if abs(power) > _MAX_EXPONENT and number:
            return _bounded(
                number * Decimal(10) ** (_MAX_EXPONENT if power > 0 else -_MAX_EXPONENT), text
            )
        return _bounded(number.scaleb(power), text)
    suffix = match.group("suffix")
    if suffix not in _SUFFIX:
        raise ValueError(f"{shown(text)} has an unknown quantity suffix {suffix!r}")
    return _bounded(number * _SUFFIX[suffix], text)


def _bounded(number: Decimal, written: object) -> Decimal:
    if abs(number) > _MAX:
        raise ValueError(
            f"{shown(str(written))} is larger than 2^63-1 (Kubernetes counts quantities in an int64)"
        )
    if number and abs(number) < _LEAST:
        raise ValueError(f"{shown(str(written))} is smaller than 1n, the least Kubernetes quantity")
    return number


def size_problem(name: str, amount: Decimal) -> str | None:
    """Whether a node's (a broker pod's) amount of resource ``name`` is more
    than any node has (flux/limits.py)."""
    if name == "cpu" and amount > MAX_CORES_PER_NODE:
        return f"more CPUs than any node has (at most {MAX_CORES_PER_NODE})"
    if name == "memory" and amount > MAX_MEMORY_PER_NODE:
        return "more memory than any node has (at most 64Ti)"
    if "gpu" in name.lower() and amount > MAX_GPUS_PER_NODE:
        return f"more GPUs than any node has (at most {MAX_GPUS_PER_NODE})"
    return None
