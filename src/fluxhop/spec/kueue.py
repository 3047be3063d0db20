"""Kueue's own spellings, which a MiniCluster uses as they are: the queue is
the ``kueue.x-k8s.io/queue-name`` label (on the MiniCluster or in
``spec.jobLabels``), topology-aware placement the podset topology annotation
on the pods (``spec.pod.annotations``). A file and the CLI flags therefore say
the same thing in the same words, and a Kueue user reads them unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "KUEUE_PREFIX",
    "PREFERRED_TOPOLOGY",
    "QUEUE_LABEL",
    "REQUIRED_TOPOLOGY",
    "queue_of",
    "topology_of",
]

KUEUE_PREFIX = "kueue.x-k8s.io/"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def queue_of(spec: MiniCluster) -> str | None:
    """The Kueue LocalQueue the MiniCluster is submitted to, if any."""
    return spec.spec.job_labels.get(QUEUE_LABEL) or spec.metadata.labels.get(QUEUE_LABEL)


def topology_of(spec: MiniCluster) -> tuple[str, bool] | None:
    """(topology level, required?) from the pods' Kueue annotation, if any."""
    annotations = spec.spec.pod.annotations
    if REQUIRED_TOPOLOGY in annotations:
        return annotations[REQUIRED_TOPOLOGY], True
    if PREFERRED_TOPOLOGY in annotations:
        return annotations[PREFERRED_TOPOLOGY], False
    return None
