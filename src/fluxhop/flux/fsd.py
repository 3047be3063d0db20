"""RFC 23 Flux Standard Duration: ``30s``, ``1.5h``, ``2d``, ``0``.

Used for ``[tbon] connect_timeout`` and for job time limits. A bare number is
seconds, as RFC 23 says; ``flux run -t`` alone treats a bare number as minutes,
which :func:`parse_time_limit` implements.
"""

from __future__ import annotations

import math
import re

from fluxhop.errors import DurationError
from fluxhop.flux.limits import MAX_SECONDS

__all__ = ["format_fsd", "parse", "parse_time_limit"]

_UNITS = {"": 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0, "d": 86400.0}
_FSD_RE = re.compile(r"(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(?P<unit>ms|s|m|h|d)?")


def parse(text: str) -> float:
    """Seconds in an FSD string; ``inf``/``infinity`` give ``math.inf``."""
    if not isinstance(text, str):
        raise DurationError(f"a duration must be a string such as '30s', not {text!r}")
    stripped = text.strip()
    if stripped.lower() in ("inf", "infinity"):
        return math.inf
    match = _FSD_RE.fullmatch(stripped)
    if not match:
        raise DurationError(
            f"invalid duration {text!r}: use a number with an optional unit "
            "s, m, h or d (e.g. '30s', '1.5h')"
        )
    return _bounded(float(match.group("number")) * _UNITS[match.group("unit") or ""], text)


def _bounded(seconds: float, text: str) -> float:
    """A written number past MAX_SECONDS (``1e400``) is a typo, not a duration;
    a duration without end is written ``inf``."""
    if not seconds <= MAX_SECONDS:
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        raise DurationError(
            f"duration {shown!r} is longer than {MAX_SECONDS} seconds (about 68 years); "
            "write inf for no limit"
        )
    return seconds


def parse_time_limit(text: str) -> float:
    """``flux run -t`` semantics: a bare number is minutes, else an FSD."""
    stripped = str(text).strip()
    if re.fullmatch(r"[0-9]*\.?[0-9]+", stripped):
        return _bounded(float(stripped) * 60.0, stripped)
    return parse(stripped)


def format_fsd(seconds: float) -> str:
    """Shortest exact FSD for ``seconds`` (``90`` → ``"90s"``, ``3600`` → ``"1h"``)."""
    if math.isinf(seconds):
        return "inf"
    if seconds < 0 or math.isnan(seconds):
        raise DurationError(f"a duration cannot be {seconds!r}")
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{seconds:g}s"
