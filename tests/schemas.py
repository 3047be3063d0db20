"""Validate objects against the real schemas: Kubernetes' OpenAPI schemas
(kubernetes-validate, strict) for built-in kinds and the CRDs in
``../shared/conformance/crds`` for JobSet, MiniCluster and Kubeflow Trainer.

CRD schemas get the treatment reference/python-ecosystem.md §2.3 describes:
``x-kubernetes-int-or-string`` and ``nullable`` become JSON Schema, and every
object with ``properties`` and no ``additionalProperties`` is closed, which
imitates the API server's ``fieldValidation=Strict``.
"""

from __future__ import annotations

import copy
import functools
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.conformance import CONFORMANCE, REPO

KUBERNETES_VERSION = "1.33"
# kinds newer than KUBERNETES_VERSION, checked against the release that made them GA
NEWER_KINDS = {
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"): "1.36",
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"): "1.36",
}

CRD_FILES = {
    ("jobset.x-k8s.io", "JobSet"): "jobset.x-k8s.io_jobsets.yaml",
    ("flux-framework.org", "MiniCluster"): "flux-framework.org_miniclusters.yaml",
    ("trainer.kubeflow.org", "TrainJob"): "trainer.kubeflow.org_trainjobs.yaml",
    ("trainer.kubeflow.org", "TrainingRuntime"): "trainer.kubeflow.org_trainingruntimes.yaml",
    (
        "trainer.kubeflow.org",
        "ClusterTrainingRuntime",
    ): "trainer.kubeflow.org_clustertrainingruntimes.yaml",
}


class SchemaError(AssertionError):
    """An object a real API server would refuse."""


def _structural_to_jsonschema(node: Any, strict: bool) -> Any:
    if isinstance(node, list):
        return [_structural_to_jsonschema(item, strict) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: _structural_to_jsonschema(v, strict)
        for k, v in node.items()
        if not k.startswith("x-kubernetes-")
    }
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    out.pop("nullable", None)
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if strict and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


KUEUE_PLURALS = {"Workload": "workloads", "ResourceFlavor": "resourceflavors",
                 "WorkloadPriorityClass": "workloadpriorityclasses"}  # fmt: skip


@functools.cache
def kueue_crds() -> Path | None:
    """Kueue's CRDs, from the Go module the test cluster builds Kueue from
    (tests/realk8s/go/kueue): None where it was not fetched, and Kueue's
    objects then go unchecked here (the real cluster checks them)."""
    gomod = REPO / "tests" / "realk8s" / "go" / "kueue" / "go.mod"
    found = re.search(r"^\s*sigs\.k8s\.io/kueue (v\S+)", gomod.read_text(), re.M)
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if found is None or not cache:
        return None
    bases = Path(cache) / f"sigs.k8s.io/kueue@{found[1]}" / "config/components/crd/bases"
    return bases if bases.is_dir() else None


def crd_path(group: str, kind: str) -> Path:
    """The CRD a kind is checked against. MiniCluster: fluxhop's deploy/crd.yaml,
    the Flux Operator's with the same spec and a status that says more
    (tests/operator/test_deploy.py holds it to that)."""
    if (group, kind) == ("flux-framework.org", "MiniCluster"):
        return REPO / "deploy" / "crd.yaml"
    if group == "kueue.x-k8s.io":
        bases = kueue_crds()
        if bases is None:
            raise SchemaError("Kueue's CRDs are not here")
        return bases / f"kueue.x-k8s.io_{KUEUE_PLURALS[kind]}.yaml"
    return CONFORMANCE / "crds" / CRD_FILES[(group, kind)]


@functools.cache
def _crd_validator(group: str, kind: str, version: str) -> jsonschema.Draft202012Validator:
    crd = yaml.safe_load(crd_path(group, kind).read_text())
    for served in crd["spec"]["versions"]:
        if served["name"] == version:
            schema = _structural_to_jsonschema(
                copy.deepcopy(served["schema"]["openAPIV3Schema"]), True
            )
            jsonschema.Draft202012Validator.check_schema(schema)
            return jsonschema.Draft202012Validator(schema)
    raise SchemaError(f"{kind}.{group} has no version {version} in the CRD")


def _check_metadata(obj: dict[str, Any]) -> None:
    """What the schemas leave out: DNS-1123 object names and label values."""
    from fluxhop.spec.names import dns_label_problem

    meta = obj.get("metadata", {})
    name = meta.get("name", "")
    if not name or len(name) > 253 or dns_label_problem(name.split(".")[0]):
        raise SchemaError(f"{obj.get('kind')} name {name!r} is not a valid DNS-1123 name")
    for key, value in (meta.get("labels") or {}).items():
        if len(value) > 63:
            raise SchemaError(f"label {key}={value!r} is longer than 63 characters")


def validate(obj: dict[str, Any]) -> None:
    """Raise :class:`SchemaError` unless a real API server would admit ``obj``."""
    api_version = obj.get("apiVersion", "")
    group, _, version = api_version.rpartition("/")
    _check_metadata(obj)
    if group == "kopf.dev":
        return  # kopf's peering CRD (deploy/peering.yaml) preserves every field
    key = (group, obj.get("kind", ""))
    if group == "kueue.x-k8s.io" and kueue_crds() is None:
        return  # unchecked here: see kueue_crds
    if key in CRD_FILES or group == "kueue.x-k8s.io":
        errors = sorted(
            _crd_validator(group, obj["kind"], version).iter_errors(obj), key=lambda e: list(e.path)
        )
        if errors:
            first = errors[0]
            path = ".".join(str(p) for p in first.absolute_path)
            raise SchemaError(f"{obj['kind']} {path}: {first.message}")
        return
    try:
        kubernetes_validate.validate(obj, NEWER_KINDS.get(key, KUBERNETES_VERSION), strict=True)
    except kubernetes_validate.ValidationError as err:
        path = ".".join(str(p) for p in err.path)
        raise SchemaError(f"{obj.get('kind')} {path}: {err.message}") from None
