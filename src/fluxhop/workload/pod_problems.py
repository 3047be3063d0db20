"""What keeps a MiniCluster's pod from running its containers, or ended one,
in the node's own words: problems only a node finds, which no wait outlasts.

The kubelet says them in a container's state: ``waiting`` with a reason
(an image it cannot pull, in the registry's words; a Secret or ConfigMap
that is not there; an image that runs as root under ``runAsNonRoot``) or
``terminated`` with ``OOMKilled``. A wait that sees one stops at once and
says it in one line, with the rank and the pod; ``status`` says it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluxhop.workload.marks import COMPLETION_INDEX

__all__ = ["STUCK", "PodProblem", "pod_problem"]

# Waiting reasons no wait outlasts: the kubelet retries them with a back-off,
# but each needs someone to change something (the image, a Secret, the spec).
STUCK = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
STATEFULSET_INDEX = "apps.kubernetes.io/pod-index"
# containerd's words for a subPath an image volume does not have: the view
# image mounted (flux.container.volume image) holds no Flux view
MISSING_SUBPATH = "image subpath"
VIEW_HINT = (
    "the Flux view image has no such directory; set flux.container.image to a Flux view "
    "image (a Spack view at /opt/views/view, its tree at /opt/software)"
)


@dataclass(frozen=True)
class PodProblem:
    pod: str
    rank: int | None
    container: str
    reason: str
    message: str

    def line(self) -> str:
        where = f"pod {self.pod}" if self.rank is None else f"rank {self.rank} (pod {self.pod})"
        said = f": {self.message}" if self.message else ""
        return f"{where}, container {self.container}: {self.reason}{said}"


def _rank(pod: dict[str, Any]) -> int | None:
    metadata = pod.get("metadata", {})
    for source in (metadata.get("annotations") or {}, metadata.get("labels") or {}):
        for key in (COMPLETION_INDEX, STATEFULSET_INDEX):
            value = source.get(key)
            if value is not None and str(value).isdigit():
                return int(value)
    return None


def _statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _limit(pod: dict[str, Any], container: str) -> str | None:
    spec = pod.get("spec") or {}
    for each in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if each.get("name") == container:
            limit = ((each.get("resources") or {}).get("limits") or {}).get("memory")
            return str(limit) if limit is not None else None
    return None


def pod_problem(pod: dict[str, Any]) -> PodProblem | None:
    """The first container of ``pod`` (init containers first) stuck on a
    STUCK reason, or killed for memory, in words; None when there is none."""
    name = pod.get("metadata", {}).get("name", "?")
    for status in _statuses(pod):
        container = status.get("name", "?")
        state = status.get("state") or {}
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in STUCK:
            message = " ".join(str(waiting.get("message") or "").split())
            if waiting["reason"] == "CreateContainerError" and MISSING_SUBPATH in message:
                message = f"{message}; {VIEW_HINT}"
            return PodProblem(name, _rank(pod), container, waiting["reason"], message)
        for ended in (state.get("terminated"), (status.get("lastState") or {}).get("terminated")):
            if ended and ended.get("reason") == "OOMKilled":
                limit = _limit(pod, container)
                code = ended.get("exitCode", 137)
                message = f"exit {code}, killed for using more memory than its limit" + (
                    f" ({limit})" if limit else ""
                )
                return PodProblem(name, _rank(pod), container, "OOMKilled", message)
    return None
