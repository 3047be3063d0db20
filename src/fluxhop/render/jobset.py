"""Target ``jobset``: the same pods in a JobSet (jobset.x-k8s.io/v1alpha2).

JobSet names pods ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` and runs
its own headless Service, so the broker hosts are ``<name>-node-0-<i>`` and
fluxhop renders no Service of its own.
"""

from __future__ import annotations

from typing import Any

from fluxhop.render.bundle import Bundle
from fluxhop.render.job import job_spec, suspended
from fluxhop.render.objects import metadata, workload_labels
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["REPLICATED_JOB", "host_prefix", "jobset"]

REPLICATED_JOB = "node"


def host_prefix(name: str) -> str:
    return f"{name}-{REPLICATED_JOB}-0-"


def jobset(spec: MiniCluster, bundle: Bundle) -> dict[str, Any]:
    body: dict[str, Any] = {
        **suspended(spec),
        "network": {
            "enableDNSHostnames": True,
            "subdomain": spec.headless_name,
            "publishNotReadyAddresses": True,
        },
        "failurePolicy": {"maxRestarts": 0},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [REPLICATED_JOB]},
        "replicatedJobs": [
            {
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {"spec": job_spec(spec, bundle, subdomain=None)},
            }
        ],
    }
    if spec.spec.cleanup:
        body["ttlSecondsAfterFinished"] = 0
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata(spec, spec.name, workload_labels(spec)),
        "spec": body,
    }
