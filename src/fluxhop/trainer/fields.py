"""The Trainer API fields a Flux TrainJob is read from, and which of them
fluxhop does not act on.

An unknown key is refused before this, with the closest known field, by the
structural check (schema.py, as kubectl's strict field validation refuses
it in a cluster). A field of the API that fluxhop does not act on is a
warning here, never silently dropped. ``tests/trainer/test_fields.py`` keeps these tables equal to the
Trainer CRDs' properties.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from fluxhop.errors import FluxhopWarning
from fluxhop.spec.kueue import QUEUE_LABEL

__all__ = ["RUNTIME_FIELDS", "TRAINJOB_FIELDS", "screen_runtime", "screen_trainjob"]

_CONTROLLER = "the Trainer controller acts on it, fluxhop trainer does not"
_NO_QUEUE = (
    "fluxhop trainer run starts the JobSet at once (to queue it, give the TrainJob to the "
    "Trainer controller with Kueue)"
)

# path -> {field: None (read) or why it is not acted on}
TRAINJOB_FIELDS: dict[str, dict[str, str | None]] = {
    "spec": {
        "runtimeRef": None,
        "trainer": None,
        "activeDeadlineSeconds": _CONTROLLER,
        "initializer": "fluxhop builds no dataset or model initializer",
        "managedBy": _CONTROLLER,
        "runtimePatches": "fluxhop applies no runtime patches; put the change in the runtime",
        "suspend": None,  # the JobSet mirrors it
    },
    "spec.runtimeRef": {"apiGroup": None, "kind": None, "name": None},
    "spec.trainer": {
        "args": None,
        "command": None,
        "env": None,
        "image": None,
        "numNodes": None,
        "numProcPerNode": None,
        "resourcesPerNode": None,
    },
}

RUNTIME_FIELDS: dict[str, dict[str, str | None]] = {
    "spec": {
        "mlPolicy": None,
        "template": None,
        "podGroupPolicy": "fluxhop creates no PodGroup (Flux's brokers wait for every rank)",
    },
    "spec.mlPolicy": {
        "flux": None,
        "numNodes": None,
        "jax": None,  # another policy: refused beside flux (plan)
        "mpi": None,
        "torch": None,
        "xgboost": None,
    },
    "spec.mlPolicy.flux": {"numProcPerNode": None},
}


def _at(doc: Mapping[str, Any], path: str) -> Any:
    node: Any = doc
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _screen(doc: Mapping[str, Any], tables: dict[str, dict[str, str | None]], what: str) -> None:
    for path, known in tables.items():
        node = _at(doc, path)
        if not isinstance(node, Mapping):
            continue  # absent, or a type error plan() reports in its words
        for key in node:
            # an unknown key never gets here: schema.check_document refused it first
            why = known.get(key)
            if why is not None and node[key] not in (None, False, "", [], {}):
                warnings.warn(
                    f"{what}: {path}.{key} is ignored: {why}", FluxhopWarning, stacklevel=3
                )


def screen_trainjob(trainjob: Mapping[str, Any]) -> None:
    name = _at(trainjob, "metadata.name")
    _screen(trainjob, TRAINJOB_FIELDS, f"TrainJob {name}")
    labels = _at(trainjob, "metadata.labels")
    if isinstance(labels, Mapping) and labels.get(QUEUE_LABEL):
        warnings.warn(
            f"TrainJob {name}: the label {QUEUE_LABEL} is ignored: {_NO_QUEUE}",
            FluxhopWarning,
            stacklevel=2,
        )


def screen_runtime(runtime: Mapping[str, Any]) -> None:
    name = _at(runtime, "metadata.name")
    _screen(runtime, RUNTIME_FIELDS, f"{runtime.get('kind', 'runtime')} {name}")
