"""RFC 29 hostlists, decoded and encoded exactly as flux-core's libhostlist does.

Written by hand on purpose: ``python-hostlist`` sorts and de-duplicates on
encode, splits multi-bracket names into a cartesian product and does not treat
spaces and tabs as separators, so its output would reorder broker ranks
(reference/python-ecosystem.md §3.2). Rank order is the whole point of the
``[bootstrap] hosts`` array, so this module keeps order and duplicates.

The rules mirrored from flux-core (``src/common/libhostlist``):

* tokens are separated by ``,``, space or tab outside brackets;
* ``prefix[ranges]`` expands each range ``lo-hi`` with the zero-padding width
  of ``lo``; anything after the first ``]`` is a literal suffix and the hosts it
  produces are single names that never compress again;
* a range holds at most 1,048,576 hosts, a bracket at most 10,240 ranges;
* the encoder appends host by host, joining a host onto the previous range when
  the prefix matches, the number is the next one and the zero-padding widths are
  compatible; ranges sharing a prefix share one bracket. Nothing is sorted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fluxhop.arguments import checked
from fluxhop.errors import HostlistError

MAX_RANGE = 1 << 20  # hosts per range (flux-core MAX_RANGE)
MAX_RANGES = 10240  # ranges per bracket (flux-core MAX_RANGES)
# The most hosts decode() expands (and runs() builds): a short hostlist can
# name 10 billion hosts. count() never expands, so it has no such limit.
MAX_HOSTS = 1 << 20
_ULONG_MAX = (1 << 64) - 1
_SEPARATORS = ",\t "
_INVALID_HOST_CHARS = frozenset(",[]\t ")
_DIGITS = "0123456789"
_SPLIT_RE = re.compile(r"[,\t ]+")
_C_SPACE = " \t\n\v\f\r"
_SHOWN = 60  # characters of a bad hostlist quoted in an error message

__all__ = [
    "MAX_HOSTS",
    "MAX_RANGE",
    "HostRun",
    "count",
    "decode",
    "encode",
    "expand",
    "nth",
    "runs",
]


class _Range:
    """A run of hosts ``prefix + "%0*lu" % (width, n)`` for n in lo..hi.

    A *single* range is one host whose name has no numeric suffix (or that came
    from a bracket with a literal suffix); its whole name is the prefix.
    """

    __slots__ = ("hi", "lo", "prefix", "single", "width")

    def __init__(self, prefix: str, lo: int, hi: int, width: int, single: bool) -> None:
        self.prefix = prefix
        self.lo = lo
        self.hi = hi
        self.width = width
        self.single = single

    def count(self) -> int:
        return 1 if self.single else self.hi - self.lo + 1

    def host(self, offset: int) -> str:
        if self.single:
            return self.prefix
        return f"{self.prefix}{self.lo + offset:0{self.width}d}"

    def hosts(self) -> list[str]:
        if self.single:
            return [self.prefix]
        prefix, width = self.prefix, self.width
        return [f"{prefix}{n:0{width}d}" for n in range(self.lo, self.hi + 1)]

    def numbers(self) -> str:
        text = f"{self.lo:0{self.width}d}"
        if self.lo < self.hi:
            text += f"-{self.hi:0{self.width}d}"
        return text


def _zero_padded(num: int, width: int) -> int:
    digits = len(str(num))
    return width - digits if width > digits else 0


def _width_combine(a: _Range, b: _Range) -> bool:
    """flux-core ``width_equiv``: may widen or narrow one side to match."""
    if a.width == b.width:
        return True
    npad = _zero_padded(a.lo, a.width)
    nmpad = _zero_padded(a.lo, b.width)
    mpad = _zero_padded(b.lo, b.width)
    mnpad = _zero_padded(b.lo, a.width)
    if npad != nmpad and mpad != mnpad:
        return False
    if npad != nmpad:
        b.width = a.width
    else:
        a.width = b.width
    return True


def _same_prefix(a: _Range, b: _Range) -> bool:
    return a.prefix == b.prefix and a.single == b.single


def _within(a: _Range, b: _Range) -> bool:
    """True when the two ranges are written inside one bracket."""
    return a.prefix == b.prefix and not a.single and not b.single


class _Builder:
    """The range array of a flux-core ``struct hostlist`` being appended to."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: list[_Range] = []

    def append_range(self, new: _Range) -> None:
        ranges = self.ranges
        if ranges:
            tail = ranges[-1]
            if (
                _same_prefix(tail, new)
                and not new.single
                and tail.hi == new.lo - 1
                and _width_combine(tail, new)
            ):
                tail.hi = new.hi
                return
        ranges.append(new)

    def append_host(self, host: str) -> None:
        self.append_range(_parse_host(host))


def _parse_host(host: str) -> _Range:
    """Split a host name into prefix and numeric suffix (flux ``hostname_create``)."""
    prefix = host.rstrip(_DIGITS)
    if len(prefix) == len(host):
        return _Range(host, 0, 0, 0, True)
    suffix = host[len(prefix) :]
    num = int(suffix)
    if num > _ULONG_MAX:
        # flux-core silently drops such a host (strtoul overflow); dropping a
        # broker rank without a word would be worse than refusing the name.
        raise HostlistError(f"host {host!r}: numeric suffix {suffix} is too large")
    return _Range(prefix, num, num, len(suffix), False)


def _strtoul(text: str) -> tuple[int, int]:
    """Emulate C ``strtoul(text, &end, 10)``: return (value, end index).

    An end index of 0 means no conversion was made.
    """
    i = 0
    n = len(text)
    while i < n and text[i] in _C_SPACE:
        i += 1
    if i < n and text[i] == "+":
        i += 1
    start = i
    while i < n and text[i] in _DIGITS:
        i += 1
    if i == start:
        return 0, 0
    value = int(text[start:i])
    if value > _ULONG_MAX:
        raise HostlistError(f"number {text[start:i]} is too large")
    return value, i


def _show(text: str) -> str:
    """Quote user input for a one-line error, shortened if it is huge."""
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def _parse_range(term: str, source: str) -> tuple[int, int, int]:
    """One ``lo`` or ``lo-hi`` term of a bracket: return (lo, hi, width)."""
    low_text, dash, high_text = term.partition("-")
    if dash and high_text.startswith("-"):
        raise HostlistError(f"invalid hostlist {_show(source)}: bad range {_show(term)}")
    lo, end = _strtoul(low_text)
    if end == 0:
        raise HostlistError(f"invalid hostlist {_show(source)}: bad range {_show(term)}")
    if high_text:
        hi, end = _strtoul(high_text)
        if end == 0 or end != len(high_text):
            raise HostlistError(f"invalid hostlist {_show(source)}: bad range {_show(term)}")
    else:
        # flux-core accepts "5-" as the single number 5; so do we.
        if end != len(low_text):
            raise HostlistError(f"invalid hostlist {_show(source)}: bad range {_show(term)}")
        hi = lo
    if lo > hi:
        raise HostlistError(f"invalid hostlist {_show(source)}: range {_show(term)} runs backwards")
    if hi - lo + 1 > MAX_RANGE:
        raise HostlistError(
            f"invalid hostlist {_show(source)}: range {_show(term)} holds more than {MAX_RANGE} hosts"
        )
    return lo, hi, len(low_text)


def _tokens(text: str) -> list[str]:
    """flux-core ``next_tok``: separators split only outside brackets."""
    if "[" not in text and "]" not in text:
        return [token for token in _SPLIT_RE.split(text) if token]
    tokens = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in _SEPARATORS:
            i += 1
        if i >= n:
            break
        start, level = i, 0
        while i < n and (level != 0 or text[i] not in _SEPARATORS):
            char = text[i]
            if char == "[":
                level += 1
            elif char == "]":
                level -= 1
            i += 1
        tokens.append(text[start:i])
    return tokens


_Item = tuple[str, int, int, int, str]  # prefix, lo, hi, width, suffix; hi < 0: one host


def _items(text: str) -> list[_Item]:
    """The hostlist's hosts and ranges as parsed, nothing expanded."""
    if not isinstance(text, str):
        raise HostlistError(f"a hostlist must be a string, not {type(text).__name__}")
    items: list[_Item] = []
    for token in _tokens(text):
        open_at = token.find("[")
        if open_at < 0:
            if "]" in token:
                raise HostlistError(f"invalid hostlist {_show(text)}: unmatched ']'")
            items.append((token, 0, -1, 0, ""))
            continue
        close_at = token.find("]", open_at + 1)
        if close_at < 0:
            raise HostlistError(f"invalid hostlist {_show(text)}: unmatched '['")
        prefix = token[:open_at]
        suffix = token[close_at + 1 :]
        terms = token[open_at + 1 : close_at].split(",")
        if len(terms) > MAX_RANGES:
            raise HostlistError(
                f"invalid hostlist {_show(text)}: more than {MAX_RANGES} ranges in a bracket"
            )
        for term in terms:
            lo, hi, width = _parse_range(term, text)
            items.append((prefix, lo, hi, width, suffix))
    return items


def _total(items: Sequence[_Item]) -> int:
    return sum(1 if hi < 0 else hi - lo + 1 for _, lo, hi, _, _ in items)


def _decode_ranges(text: str, limit: int = MAX_HOSTS) -> list[_Range]:
    items = _items(text)
    total = _total(items)
    if total > limit:
        raise HostlistError(
            f"hostlist {_show(text)} names {total} hosts, more than the {limit} fluxhop expands"
        )
    builder = _Builder()
    for prefix, lo, hi, width, suffix in items:
        if hi < 0:
            builder.append_host(prefix)
        elif suffix:
            # a literal suffix makes every host a single name (flux-core does the same)
            for num in range(lo, hi + 1):
                builder.append_range(_Range(f"{prefix}{num:0{width}d}{suffix}", 0, 0, 0, True))
        else:
            builder.append_range(_Range(prefix, lo, hi, width, False))
    return builder.ranges


def _format(ranges: Sequence[_Range]) -> str:
    """flux-core ``hostlist_ranged_string``.

    One difference: a bracket is closed after MAX_RANGES ranges and the next
    one opened with the same prefix. flux-core's encoder has no such limit, but
    its decoder refuses a bracket of more than MAX_RANGES ranges, so its own
    output for a huge scattered list could not be read back by a broker.
    """
    out: list[str] = []
    i, n = 0, len(ranges)
    while i < n:
        first = ranges[i]
        bracket = first.count() > 1 or (i + 1 < n and _within(first, ranges[i + 1]))
        numbers: list[str] = []
        while True:
            current = ranges[i]
            if not current.single:
                numbers.append(current.numbers())
            i += 1
            if i >= n or not _within(ranges[i], ranges[i - 1]) or len(numbers) == MAX_RANGES:
                break
        if bracket:
            out.append(f"{first.prefix}[{','.join(numbers)}]")
        else:
            out.append(first.prefix + "".join(numbers))
    return ",".join(out)


@dataclass(frozen=True)
class HostRun:
    """A run of hosts ``prefix + n`` (zero-padded to ``width``) for n in lo..hi,
    or a single host (``single``) whose whole name is ``prefix``."""

    prefix: str
    lo: int
    hi: int
    width: int
    single: bool

    @property
    def count(self) -> int:
        return 1 if self.single else self.hi - self.lo + 1

    @property
    def first(self) -> str:
        return self.prefix if self.single else f"{self.prefix}{self.lo:0{self.width}d}"

    @property
    def last(self) -> str:
        return self.prefix if self.single else f"{self.prefix}{self.hi:0{self.width}d}"


@checked
def runs(text: str) -> list[HostRun]:
    """The runs a hostlist decodes into, without expanding them:
    ``runs("node[1-1000],login")`` is the run node1..node1000 (count 1000),
    then the single host login."""
    return [HostRun(r.prefix, r.lo, r.hi, r.width, r.single) for r in _decode_ranges(text)]


@checked
def decode(text: str) -> list[str]:
    """Expand an RFC 29 hostlist into host names, in order, duplicates kept.

    >>> decode("foo[1-3],bar")
    ['foo1', 'foo2', 'foo3', 'bar']
    """
    hosts: list[str] = []
    for item in _decode_ranges(text):
        hosts.extend(item.hosts())
    return hosts


@checked
def expand(text: str) -> list[str]:
    """Alias of :func:`decode` (``flux hostlist --expand``)."""
    return decode(text)


def _check_host(host: object, index: int) -> str:
    if not isinstance(host, str):
        raise HostlistError(f"host #{index} must be a string, not {type(host).__name__}")
    if not host:
        raise HostlistError(f"host #{index} is empty")
    bad = _INVALID_HOST_CHARS.intersection(host)
    if bad:
        shown = "".join(sorted(bad)).replace("\t", "\\t")
        raise HostlistError(
            f"host #{index} {host!r} contains {shown!r}, not allowed in a host name"
        )
    return host


@checked
def encode(hosts: Iterable[str]) -> str:
    """Compress host names into the shortest RFC 29 hostlist, keeping order.

    >>> encode(["host1", "host0", "host5", "host4"])
    'host[1,0,5,4]'
    """
    if isinstance(hosts, str):
        raise HostlistError("encode() takes a list of host names, not a string")
    builder = _Builder()
    for index, host in enumerate(hosts):
        builder.append_host(_check_host(host, index))
    return _format(builder.ranges)


@checked
def count(text: str) -> int:
    """Number of hosts in a hostlist, without expanding it (suffixed brackets
    such as ``x[1-1000000]y`` included)."""
    return _total(_items(text))


def _host_at(ranges: Sequence[_Range], index: int, total: int, text: str) -> str:
    if index < 0:
        index += total
    if not 0 <= index < total:
        raise HostlistError(f"index {index} out of range: hostlist {_show(text)} has {total} hosts")
    for item in ranges:
        size = item.count()
        if index < size:
            return item.host(index)
        index -= size
    raise AssertionError("unreachable")  # pragma: no cover


@checked
def nth(text: str, index: int | str) -> str:
    """Host(s) at ``index`` (``flux hostlist --nth``).

    ``index`` is an int (negative counts from the end) and the host name is
    returned, or an RFC 22 idset string and the selected hosts come back as a
    hostlist.
    """
    from fluxhop.flux import idset  # sibling module; imported late to stay light

    ranges = _decode_ranges(text)
    total = sum(item.count() for item in ranges)
    if isinstance(index, bool):
        raise HostlistError("index must be an integer or an idset string")
    if isinstance(index, int):
        return _host_at(ranges, index, total, text)
    picks = idset.decode(index)
    return encode(_host_at(ranges, i, total, text) for i in picks)
