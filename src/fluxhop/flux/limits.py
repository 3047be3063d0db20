"""What the largest machine has: the bounds every door holds sizes to.

A request beyond these is a typo or an attack, never a job: no node has a
million cores, and an R or a jobspec built from one costs memory and time
for nothing. The bounds are generous on purpose (docs/guides/cli.md lists
them): the largest single-system nodes have a few thousand hardware threads
(e.g. 2 x 192-core CPUs with SMT: 768) and a few dozen accelerators.
"""

from __future__ import annotations

__all__ = [
    "MAX_CORES_PER_NODE",
    "MAX_GPUS_PER_NODE",
    "MAX_MEMORY_PER_NODE",
    "MAX_QUANTITY",
    "MAX_SECONDS",
    "MAX_TASKS",
]

MAX_CORES_PER_NODE = 4096  # cores (CPUs) a node - a broker's pod - may have or a task may ask for
MAX_GPUS_PER_NODE = 64  # GPUs (any device resource) per node, likewise
MAX_MEMORY_PER_NODE = 64 * 2**40  # 64 TiB
MAX_TASKS = 100_000 * MAX_CORES_PER_NODE  # one task per core of the most nodes a Job may have
MAX_SECONDS = 2**31 - 1  # a time limit or deadline (about 68 years)
MAX_QUANTITY = 2**63 - 1  # the largest quantity Kubernetes holds (an int64)
