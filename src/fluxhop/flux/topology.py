"""TBON topologies (``[tbon] topo``): who is each broker rank's parent.

Mirrors flux-core ``src/modules/overlay/topology.c`` so that a configuration
can be checked before it is written: a rank with children needs a ``bind``
URI, a parent needs a ``connect`` URI, and a ``custom`` tree must be acyclic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fluxhop.errors import BrokerConfigError

__all__ = ["parents", "validate_topo"]


def _kary(size: int, k: int) -> list[int | None]:
    if k == 0:
        return [None] + [0] * (size - 1)
    return [None] + [(rank - 1) // k for rank in range(1, size)]


def _binomial(size: int) -> list[int | None]:
    result: list[int | None] = [None] * size
    levels = 0
    while (1 << levels) < size:
        levels += 1
    stack = [(0, levels)]
    while stack:
        root, k = stack.pop()
        for j in range(k):
            child = root + (1 << j)
            if child < size:
                result[child] = root
                stack.append((child, j))
    return result


def _mincrit(size: int, k: int | None) -> list[int | None]:
    if k is None:
        if size <= 1025:
            k = 0
        else:
            k = 2
            while -(-(size - 1 - k) // k) > 1024:
                k += 1
    if k == 0:
        return _kary(size, 0)
    result: list[int | None] = [None] * size
    for rank in range(1, size):
        result[rank] = 0 if rank <= k else (rank - k - 1) % k + 1
    return result


def _custom(hosts: Sequence[str], parent_of: Mapping[str, str]) -> list[int | None]:
    rank_of = {host: rank for rank, host in enumerate(hosts)}
    result: list[int | None] = [None] + [0] * (len(hosts) - 1)
    for host, parent in parent_of.items():
        rank = rank_of[host]
        if parent == host:
            raise BrokerConfigError(f"[bootstrap] host {host}: parent key refers to self")
        if parent not in rank_of:
            raise BrokerConfigError(f"[bootstrap] host {host}: parent {parent!r} is not in hosts")
        if rank == 0:
            raise BrokerConfigError(f"[bootstrap] rank 0 ({host}) may not have a parent")
        result[rank] = rank_of[parent]
    for start in range(1, len(hosts)):
        seen: set[int] = set()
        step: int | None = start
        while step is not None:
            if step in seen:
                raise BrokerConfigError(
                    f"[bootstrap] parent keys of {hosts[start]} form a cycle; "
                    "every chain must end at rank 0"
                )
            seen.add(step)
            step = result[step]
    return result


def _scheme(topo: str) -> tuple[str, int | None]:
    scheme, colon, arg = topo.partition(":")
    if scheme in ("kary", "mincrit"):
        if scheme == "kary" and not colon:
            raise BrokerConfigError("[tbon] topo kary needs a fanout, e.g. kary:32")
        if not colon:
            return scheme, None
        if not arg.isdigit():
            raise BrokerConfigError(f"[tbon] topo {topo!r}: {scheme} value must be an integer >= 0")
        return scheme, int(arg)
    if scheme in ("binomial", "custom"):
        if colon:
            raise BrokerConfigError(f"[tbon] topo {topo!r}: unknown {scheme} directive")
        return scheme, None
    raise BrokerConfigError(
        f"[tbon] topo {topo!r}: unknown topology scheme; use kary:K, binomial, "
        "mincrit[:K] or custom"
    )


def validate_topo(topo: str) -> str:
    """Return ``topo`` if flux-core would accept it, else raise."""
    _scheme(topo)
    return topo


def parents(
    topo: str, hosts: Sequence[str], parent_of: Mapping[str, str] | None = None
) -> list[int | None]:
    """Parent rank of every rank (``None`` for rank 0) under ``topo``."""
    scheme, arg = _scheme(topo)
    size = len(hosts)
    if size == 0:
        return []
    if parent_of and scheme != "custom":
        raise BrokerConfigError(
            f"[bootstrap] parent keys are only used by the custom topology, not {topo!r}"
        )
    if scheme == "kary":
        return _kary(size, arg or 0)
    if scheme == "binomial":
        return _binomial(size)
    if scheme == "mincrit":
        return _mincrit(size, arg)
    return _custom(hosts, parent_of or {})
