"""The root object of a MiniCluster fluxhop created, read back: what render
recorded on it (target, maxSize, paths, lead container) and what follows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fluxhop.render.bundle import DEFAULT_PATHS
from fluxhop.render.pod import LEAD_CLAIM_ANNOTATION, LEAD_STATE_VOLUME
from fluxhop.render.targets import Target
from fluxhop.spec.kueue import QUEUE_LABEL, resize_problem
from fluxhop.spec.minicluster import FLUXHOP_OPERATOR
from fluxhop.workload.marks import (
    AUTOSCALE,
    CONFIG_DIR,
    FLUX_ROOT,
    JOB_NAME,
    JOBSET_NAME,
    LEAD_CONTAINER,
    MAX_SIZE,
    OPERATED,
    REPLICATED_JOB,
)

__all__ = ["Root"]


@dataclass(frozen=True)
class Root:
    """The root object of a MiniCluster fluxhop created."""

    target: Target
    obj: dict[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", Target.parse(self.target))

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def size(self) -> int:
        spec = self.obj.get("spec", {})
        if self.target is Target.JOB:
            return int(spec.get("parallelism", 0))
        if self.target is Target.JOBSET:
            jobs = spec["replicatedJobs"]
            node = next((job for job in jobs if job.get("name") == "node"), jobs[0])
            return int(node["template"]["spec"].get("parallelism", 0))
        return int(spec.get("size", 1))

    @property
    def max_size(self) -> int:
        annotations = self.obj["metadata"].get("annotations") or {}
        return int(annotations.get(MAX_SIZE, self.size))

    @property
    def autoscale(self) -> tuple[int, float] | None:
        """(minSize, scale-down delay) from the spec.autoscale it was made
        with, or None (none, or an annotation fluxhop cannot read)."""
        annotations = self.obj["metadata"].get("annotations") or {}
        try:
            wanted = json.loads(annotations[AUTOSCALE])
            return int(wanted["minSize"]), float(wanted["scaleDownDelaySeconds"])
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def container(self) -> str:
        """The container that runs the broker (named after the MiniCluster,
        except where a workload fixes the name, e.g. Kubeflow Trainer's node)."""
        annotations = self.obj["metadata"].get("annotations") or {}
        return str(annotations.get(LEAD_CONTAINER, self.name))

    @property
    def flux_root(self) -> str:
        """Where the pods keep Flux (the Flux view's mount path)."""
        annotations = self.obj["metadata"].get("annotations") or {}
        return str(annotations.get(FLUX_ROOT, "/mnt/flux"))

    @property
    def config_dir(self) -> str:
        """Where the pods mount the ConfigMap (entrypoint.sh, connect.sh, ...)."""
        annotations = self.obj["metadata"].get("annotations") or {}
        return str(annotations.get(CONFIG_DIR, DEFAULT_PATHS.config_dir))

    @property
    def pod_selector(self) -> dict[str, str]:
        if self.target is Target.JOBSET:
            return {JOBSET_NAME: self.name, REPLICATED_JOB: "node"}
        return {JOB_NAME: self.name}

    @property
    def fluxhop_pods(self) -> bool:
        """Whether fluxhop made the pods (its scripts are in them): every target
        but a MiniCluster resource the Flux Operator runs."""
        annotations = self.obj["metadata"].get("annotations") or {}
        return self.target is not Target.MINICLUSTER or OPERATED in annotations

    @property
    def interactive(self) -> bool | None:
        """Whether rank 0 runs no command (an instance to submit into); None
        when the root does not say (e.g. a Kubeflow Trainer JobSet)."""
        if self.target is Target.MINICLUSTER:
            return bool(self.obj.get("spec", {}).get("interactive"))
        template = self._pod_template()
        if template is None:
            return None
        lead = next(
            (
                c
                for c in template.get("spec", {}).get("containers", [])
                if c.get("name") == self.container
            ),
            None,
        )
        if lead is None or not str((lead.get("command") or [""])[-1]).endswith("entrypoint.sh"):
            return None
        return not lead.get("args")

    @property
    def lead_state_kept(self) -> str | None:
        """Where rank 0 keeps the instance's state, as the root was made:
        "claim" (the template names it for the policy), "emptyDir", or None."""
        template = self._pod_template() or {}
        if LEAD_CLAIM_ANNOTATION in (template.get("metadata", {}).get("annotations") or {}):
            return "claim"
        volumes = template.get("spec", {}).get("volumes") or []
        if any(v.get("name") == LEAD_STATE_VOLUME and "emptyDir" in v for v in volumes):
            return "emptyDir"
        return None

    def _pod_template(self) -> dict[str, Any] | None:
        spec = self.obj.get("spec", {})
        template: dict[str, Any] | None
        if self.target is Target.JOB:
            template = spec.get("template")
            return template
        jobs = spec.get("replicatedJobs") or []
        node = next((job for job in jobs if job.get("name") == "node"), jobs[0] if jobs else None)
        template = node["template"]["spec"].get("template") if node else None
        return template

    @property
    def dispatched(self) -> bool:
        """A MiniCluster resource another controller keeps (spec.managedBy,
        e.g. Kueue's MultiKueue, which runs it on a worker cluster): nothing
        of it runs here, and its status is that controller's copy."""
        if self.target is not Target.MINICLUSTER:
            return False
        manager = (self.obj.get("spec") or {}).get("managedBy")
        return manager is not None and manager != FLUXHOP_OPERATOR

    @property
    def queue(self) -> str | None:
        """The Kueue LocalQueue the workload was submitted to, if any: a
        MiniCluster resource names it on itself or in spec.jobLabels."""
        labels = self.obj["metadata"].get("labels") or {}
        if self.target is Target.MINICLUSTER:
            labels = {**labels, **((self.obj.get("spec") or {}).get("jobLabels") or {})}
        queue = labels.get(QUEUE_LABEL)
        return str(queue) if queue else None

    @property
    def suspended(self) -> bool:
        """Created suspended and not yet admitted (Kueue unsuspends it)."""
        return bool(self.obj.get("spec", {}).get("suspend"))

    def resize_problem(self) -> str | None:
        """Why a change of size would restart this MiniCluster (under Kueue), or None."""
        annotations = self.obj["metadata"].get("annotations") or {}
        return resize_problem(
            self.name, self.queue, admitted=not self.suspended, annotations=annotations
        )

    @property
    def created(self) -> datetime | None:
        stamp = self.obj["metadata"].get("creationTimestamp")
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
