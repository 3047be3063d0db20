"""What fluxhop knows of a MiniCluster's Kubernetes objects, without talking
to Kubernetes: the marks render leaves on the root, the root read back, and
the state its pods and conditions add up to. The cluster layer fetches the
objects; everything it then decides about them lives here.
"""

from __future__ import annotations

from fluxhop.workload.marks import mark_root, owner_reference, prepare, spec_hash
from fluxhop.workload.root import Root
from fluxhop.workload.status import Progress, Status, status_of

__all__ = [
    "Progress",
    "Root",
    "Status",
    "mark_root",
    "owner_reference",
    "prepare",
    "spec_hash",
    "status_of",
]
