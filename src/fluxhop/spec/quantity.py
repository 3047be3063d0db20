"""Kubernetes resource quantities (``500m``, ``2``, ``1.5``, ``4Gi``) as numbers.

Written by hand because the parsers that exist live in Kubernetes client
packages, which the pure spec layer must not import.
"""

from __future__ import annotations

import re
from decimal import Decimal, DecimalException

__all__ = ["parse_quantity"]

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
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>[A-Za-z]*|[eE][+-]?[0-9]+)"
)


def parse_quantity(value: str | int | float) -> Decimal:
    """The numeric value of a quantity; raises ``ValueError`` when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.fullmatch(str(value).strip())
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
    suffix = match.group("suffix")
    try:
        number = Decimal(match.group("number"))
        if suffix[:1] in ("e", "E"):
            return number * (Decimal(10) ** int(suffix[1:]))
        return number * _SUFFIX[suffix]
    except KeyError:
        raise ValueError(f"{value!r} has an unknown quantity suffix {suffix!r}") from None
    except DecimalException:  # an exponent past what Decimal holds
        raise ValueError(f"{value!r} is too large for a Kubernetes quantity") from None
