"""Pick the TrainJob and the runtime it names out of YAML documents.

Kubeflow's examples keep a runtime and a TrainJob in one file or in two, so
every document of every file is read, and the runtime is the one the
TrainJob's ``runtimeRef`` names (kind and name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fluxhop.documents import load_all
from fluxhop.errors import InputError
from fluxhop.trainer.errors import TrainerError
from fluxhop.trainer.plan import RUNTIME_KINDS
from fluxhop.trainer.schema import check_document

__all__ = ["pick"]


def _documents(text: str, source: str) -> list[dict[str, Any]]:
    try:
        docs = load_all(text, source)
    except InputError as err:
        raise TrainerError(str(err)) from None
    for doc in docs:
        if not isinstance(doc, dict):
            raise TrainerError(f"{source}: every YAML document must be a Kubernetes object")
    return docs


def pick(sources: Iterable[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(TrainJob, its runtime) from ``(source name, YAML text)`` pairs."""
    jobs: list[dict[str, Any]] = []
    runtimes: list[dict[str, Any]] = []
    for source, text in sources:
        for doc in _documents(text, source):
            if doc.get("kind") == "TrainJob":
                jobs.append(doc)
            elif doc.get("kind") in RUNTIME_KINDS:
                runtimes.append(doc)
            else:
                continue
            check_document(doc)  # the shape the API server would accept, before any use
    if len(jobs) != 1:
        raise TrainerError(
            f"expected one TrainJob in the files given (-f, --runtime), found {len(jobs)}"
        )
    job = jobs[0]
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    kind = ref.get("kind", "ClusterTrainingRuntime")
    name = ref.get("name")
    if not name:
        raise TrainerError("the TrainJob has no spec.runtimeRef.name; name its runtime")
    for runtime in runtimes:
        if runtime["kind"] == kind and (runtime.get("metadata") or {}).get("name") == name:
            return job, runtime
    found = ", ".join(f"{r['kind']}/{(r.get('metadata') or {}).get('name')}" for r in runtimes)
    raise TrainerError(
        f"the TrainJob uses {kind} {name!r}, which is not in the files given "
        f"({found or 'no runtimes'}); add it with --runtime FILE"
    )
