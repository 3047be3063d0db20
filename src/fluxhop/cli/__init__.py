"""The ``fluxhop`` command line (and ``flux-hop``, so ``flux hop`` works).

Job-shaping verbs use Flux's short flags (``-N`` nodes, ``-n`` tasks, ``-c``,
``-g``); cluster verbs use kubectl's. Every error is one line on stderr.

The entry points import the CLI inside the same guard that turns Ctrl-C into
one line, so that an interrupt while Python is still loading click prints
``fluxhop: interrupted``, not a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["flux_hop", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fluxhop``."""
    try:
        from fluxhop.cli.app import main as run
    except KeyboardInterrupt:
        sys.stderr.write("fluxhop: interrupted\n")
        return 130
    return run(argv)


def flux_hop(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``flux-hop``: ``flux hop ARGS`` is ``fluxhop hop ARGS``."""
    try:
        from fluxhop.cli.app import flux_hop as run
    except KeyboardInterrupt:
        sys.stderr.write("fluxhop: interrupted\n")
        return 130
    return run(argv)
