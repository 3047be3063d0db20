"""Target ``job``: an Indexed Job, the workload that needs no operator."""

from __future__ import annotations

from typing import Any

from fluxhop.render.bundle import Bundle
from fluxhop.render.objects import metadata, workload_labels
from fluxhop.render.pod import pod_template
from fluxhop.spec.kueue import queue_of
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["indexed_job", "job_spec", "suspended"]

STOPPED_BY_TERM = 143  # the entrypoint's status when the kubelet stopped it (128 + SIGTERM)


def suspended(spec: MiniCluster) -> dict[str, Any]:
    """``suspend: true`` for a queued MiniCluster (Kueue admits a workload by
    unsuspending it, all pods at once: the Job's parallelism is one pod set)
    and for one held by spec.suspend."""
    return {"suspend": True} if spec.spec.suspend or queue_of(spec) else {}


def _failure_rules(spec: MiniCluster) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
    ]
    lead_state = spec.spec.lead_state
    if lead_state is not None and not lead_state.empty_dir:  # an emptyDir goes with its pod
        rules.append(
            {
                "action": "Ignore",
                "onExitCodes": {
                    "containerName": spec.name,
                    "operator": "In",
                    "values": [STOPPED_BY_TERM],
                },
            }
        )
    return rules


def job_spec(spec: MiniCluster, bundle: Bundle, *, subdomain: str | None) -> dict[str, Any]:
    """The batch/v1 JobSpec shared by the Job and the JobSet targets.

    * parallelism = completions = size: rank 0 waits for every rank, so fewer
      pods than ranks would hang it; scaling patches both (elastic Indexed Job).
    * successPolicy on index 0: the job is done when rank 0 is, even if a
      worker lingers.
    * backoffLimit 0 with restartPolicy Never: a failed job fails the Job
      instead of restarting pods forever; disruptions (evictions, preemption)
      do not count, so a lost worker pod is replaced and rejoins (after a
      wait that grows with that index's own losses: backoffLimitPerIndex). With
      spec.leadState on a claim a pod stopped by SIGTERM (the Flux container exits 143:
      its pod was deleted) does not count either: an interactive instance
      has no command whose status that could be, and its new rank 0
      restarts it from the kept state.
    """
    body = spec.spec
    out: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": body.size,
        "parallelism": body.size,
        "backoffLimit": body.backoff_limit or 0,
        # The same limit per index, which moves the Job controller's wait
        # before a pod is made again to each index's own failures: the global
        # one doubles with every pod the Job ever lost (10 s, 20, 40, ... 10
        # min), so a worker replaced three times made a lost rank 0 wait 80 s.
        # The global limit binds first, so which failures fail the Job is
        # unchanged.
        "backoffLimitPerIndex": body.backoff_limit or 0,
        "podFailurePolicy": {"rules": _failure_rules(spec)},
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
        "activeDeadlineSeconds": body.deadline_seconds,
    }
    if body.cleanup:
        out["ttlSecondsAfterFinished"] = 0
    out["template"] = pod_template(spec, bundle, subdomain=subdomain)
    return out


def indexed_job(spec: MiniCluster, bundle: Bundle) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(spec, spec.name, workload_labels(spec)),
        "spec": {
            **suspended(spec),
            **job_spec(spec, bundle, subdomain=spec.headless_name),
        },
    }
