"""What fluxhop writes on a MiniCluster's root object so that later verbs
find it and know it without re-deriving anything: its target, a hash of its
spec, its maxSize, where its pods keep Flux and the ConfigMap, and its lead
container; and the one ownerReference every child object carries.

The workload object (Job, JobSet or MiniCluster) is the *root*: every other
object is owned by it, so one DELETE of the root removes everything.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fluxhop.arguments import checked
from fluxhop.flux.curve import CurveCert
from fluxhop.render import render
from fluxhop.render.bundle import DEFAULT_PATHS
from fluxhop.render.objects import owner_reference
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster

__all__ = [
    "AUTOSCALE",
    "AUTOSCALE_STATE",
    "COMPLETION_INDEX",
    "CONFIG_DIR",
    "FLUX_ROOT",
    "JOBSET_NAME",
    "JOB_NAME",
    "LEAD_CONTAINER",
    "MAX_SIZE",
    "OPERATED",
    "REPLICATED_JOB",
    "ROOT_KINDS",
    "SPEC_HASH",
    "TARGET_LABEL",
    "mark_root",
    "owner_reference",
    "prepare",
    "spec_hash",
]

TARGET_LABEL = "fluxhop.io/target"
OPERATED = "fluxhop.io/operated-by"  # a MiniCluster resource whose pods fluxhop's operator makes
SPEC_HASH = "fluxhop.io/spec-hash"
MAX_SIZE = "fluxhop.io/max-size"
AUTOSCALE = "fluxhop.io/autoscale"  # spec.autoscale's bounds and delay, for fluxhop autoscale
AUTOSCALE_STATE = "fluxhop.io/autoscale-state"  # fluxhop autoscale's idle time, between runs
FLUX_ROOT = "fluxhop.io/flux-root"
CONFIG_DIR = "fluxhop.io/config-dir"
LEAD_CONTAINER = "fluxhop.io/lead-container"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
ROOT_KINDS = {target: target.kind for target in Target}
JOB_NAME = "batch.kubernetes.io/job-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@checked(where="workload.spec_hash")
def spec_hash(objects: list[dict[str, Any]]) -> str:
    """What identifies a spec: every rendered object but the Secret (fresh keys)."""
    stable = [o for o in objects if o["kind"] != "Secret"]
    return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:32]


@checked(where="workload.prepare")
def prepare(
    spec: MiniCluster,
    target: Target | str = Target.JOB,
    *,
    cluster_domain: str = "cluster.local",
    cert: CurveCert | None = None,
) -> list[dict[str, Any]]:
    """Render and mark the root with its target, spec hash and maxSize."""
    objects = render(spec, target, cert=cert, cluster_domain=cluster_domain)
    marked = mark_root(
        objects,
        target,
        max_size=spec.spec.max_nodes,
        flux_root=spec.spec.flux.container.mount_path,
        config_dir=DEFAULT_PATHS.config_dir,
        container=spec.name,  # render.pod names the Flux container after the MiniCluster
    )
    wanted = spec.spec.autoscale
    if wanted is not None:
        policy = {"minSize": spec.spec.min_size or 1,
                  "scaleDownDelaySeconds": wanted.scale_down_delay_seconds}  # fmt: skip
        marked[-1]["metadata"]["annotations"][AUTOSCALE] = json.dumps(policy, sort_keys=True)
    return marked


@checked(where="workload.mark_root")
def mark_root(
    objects: list[dict[str, Any]],
    target: Target | str,
    *,
    max_size: int,
    flux_root: str,
    config_dir: str,
    container: str | None = None,
) -> list[dict[str, Any]]:
    """Label the root (the last object) so fluxhop can find and inspect it later,
    and record where its pods keep Flux and the ConfigMap, so that no later
    verb has to guess (Kubeflow Trainer pods mount theirs elsewhere)."""
    digest = spec_hash(objects)
    root = objects[-1]
    root["metadata"].setdefault("labels", {})[TARGET_LABEL] = Target.parse(target).value
    annotations = root["metadata"].setdefault("annotations", {})
    annotations[SPEC_HASH] = digest
    annotations[MAX_SIZE] = str(max_size)
    annotations[FLUX_ROOT] = flux_root
    annotations[CONFIG_DIR] = config_dir
    if container is not None:
        annotations[LEAD_CONTAINER] = container
    return objects
