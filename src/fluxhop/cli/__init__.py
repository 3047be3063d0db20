"""The ``fluxhop`` command line (and ``flux-hop``, so ``flux hop`` works).

Job-shaping verbs use Flux's short flags (``-N`` nodes, ``-n`` tasks, ``-c``,
``-g``); cluster verbs use kubectl's. Every error is one line on stderr.
"""

from __future__ import annotations

from fluxhop.cli.app import flux_hop, main

__all__ = ["flux_hop", "main"]
