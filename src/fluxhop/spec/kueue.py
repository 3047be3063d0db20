"""Kueue's own spellings, which a MiniCluster uses as they are: the queue is
the ``kueue.x-k8s.io/queue-name`` label (on the MiniCluster or in
``spec.jobLabels``), topology-aware placement the podset topology annotation
on the pods (``spec.pod.annotations``). A file and the CLI flags therefore say
the same thing in the same words, and a Kueue user reads them unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "ELASTIC_ANNOTATION",
    "KUEUE_JOB_UID",
    "KUEUE_PREFIX",
    "PREFERRED_TOPOLOGY",
    "QUEUE_LABEL",
    "REQUIRED_TOPOLOGY",
    "queue_of",
    "resize_problem",
    "topology_of",
]

KUEUE_PREFIX = "kueue.x-k8s.io/"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"  # the label Kueue puts on a job's Workload


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


def resize_problem(
    name: str, queue: str | None, *, admitted: bool, annotations: Mapping[str, str]
) -> str | None:
    """Why resizing this MiniCluster would restart it, or None.

    Kueue admitted the Job as one pod set of ``parallelism`` pods. When an
    admitted Job's parallelism changes, its Workload no longer matches it:
    Kueue stops the Job (every pod deleted) and queues it again at the new
    size, so every broker restarts and the jobs in the instance are lost.
    A Job annotated as an elastic job is resized in place instead, where
    Kueue runs with its ElasticJobsViaWorkloadSlices feature gate. A Job still
    waiting in the queue may change: Kueue makes it a new Workload."""
    if queue is None or not admitted or annotations.get(ELASTIC_ANNOTATION) == "true":
        return None
    return (
        f"MiniCluster {name} was admitted by Kueue queue {queue}, which stops a running "
        "Job whose size changes and queues it again (every broker restarts, its jobs are "
        "lost); delete it and create it with the new size, or annotate it "
        f'{ELASTIC_ANNOTATION}: "true" where Kueue runs ElasticJobsViaWorkloadSlices'
    )
