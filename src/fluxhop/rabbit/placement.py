"""Which rabbits a MiniCluster runs on.

The prototype shuffled the candidates and then intersected them as a set, so
a string filter matched nothing and two identical requests landed on
different nodes. Here the choice is deterministic: the job's rabbits in
natural order (``rabbit2`` before ``rabbit10``), filtered by
``rabbit.mpi.rabbits``, the first ``nodes`` of them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

from fluxhop.arguments import checked
from fluxhop.errors import FluxhopWarning
from fluxhop.rabbit.errors import RabbitError

__all__ = ["choose_rabbits", "natural_key"]


@checked
def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the digit runs of a host name by value."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part
    )


@checked
def choose_rabbits(
    available: Iterable[str] | str, wanted: Iterable[str] | None, nodes: int | None
) -> tuple[str, ...]:
    """The rabbits to use, or a :class:`RabbitError` that says why there are none."""
    if isinstance(available, str):
        available = available.split(",")
    pool = sorted({name.strip() for name in available if name and name.strip()}, key=natural_key)
    if not pool:
        raise RabbitError(
            "no rabbits are available to this job: its compute nodes are served by no rabbit node"
        )
    candidates = pool
    if wanted is not None:
        wanted_set = set(wanted)
        candidates = [name for name in pool if name in wanted_set]
        if not candidates:
            raise RabbitError(
                f"rabbit.mpi.rabbits={','.join(sorted(wanted_set, key=natural_key))} names none of "
                f"this job's rabbits ({','.join(pool)}); pick from those or drop rabbit.mpi.rabbits"
            )
    count = len(candidates) if nodes is None else min(nodes, len(candidates))
    if nodes is not None and nodes > len(candidates):
        warnings.warn(
            f"rabbit.mpi.nodes={nodes} but only {len(candidates)} rabbit(s) are available; "
            f"using {len(candidates)}",
            FluxhopWarning,
            stacklevel=2,
        )
    return tuple(candidates[:count])
