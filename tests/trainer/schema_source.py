"""Make fluxhop's Trainer type schemas (src/fluxhop/trainer/schemas/) from the
Kubeflow Trainer CRDs in the conformance data.

The package cannot carry the CRDs (1.8 MB, mostly descriptions), so it
carries what the API server's structural checks need of them: types,
properties, map values, list items, required fields, int-or-string and the
quantity pattern, preserve-unknown-fields. ``test_schema.py`` holds the
committed files equal to what this makes; after a CRD update run
``python -m tests.trainer.schema_source`` and commit the result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.schemas import crd_path

TARGET = Path(__file__).resolve().parents[2] / "src" / "fluxhop" / "trainer" / "schemas"
FILES = {"trainjob.json": "TrainJob", "runtime.json": "TrainingRuntime"}
SOURCE = (
    "kubeflow/trainer manifests/base/crds (commit 8c0f5059bd51, Apache-2.0): "
    "types, required fields and quantity patterns only; made by tests/trainer/schema_source.py"
)

# The API server checks a custom resource's top-level metadata as ObjectMeta
# (the CRD says only "object"); these are the fields a file may set.
_STRING = {"type": "string"}
_STRING_MAP = {"type": "object", "additionalProperties": _STRING}
OBJECT_META = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,  # the server's own fields
    "properties": {
        "name": _STRING,
        "generateName": _STRING,
        "namespace": _STRING,
        "uid": _STRING,
        "resourceVersion": _STRING,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
        "finalizers": {"type": "array", "items": _STRING},
        "generation": {"type": "integer"},
    },
}

_KEPT = ("type", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")


def skeleton(node: dict[str, Any]) -> dict[str, Any]:
    """The structural part of one schema node."""
    out: dict[str, Any] = {k: node[k] for k in _KEPT if k in node}
    if "properties" in node:
        out["properties"] = {name: skeleton(sub) for name, sub in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = skeleton(node[key])
    if node.get("required"):
        out["required"] = sorted(node["required"])
    if node.get("x-kubernetes-int-or-string") and "pattern" in node:
        out["pattern"] = node["pattern"]  # a resource quantity
    return out


def make(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load(crd_path("trainer.kubeflow.org", kind).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema = skeleton(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = OBJECT_META
    return {"$comment": SOURCE, **schema}


def text(kind: str) -> str:
    return json.dumps(make(kind), indent=None, separators=(",", ":"), sort_keys=True) + "\n"


def main() -> None:
    for name, kind in FILES.items():
        (TARGET / name).write_text(text(kind))
        print(f"wrote {TARGET / name}")


if __name__ == "__main__":
    main()
