"""Stand-ins for the API server's mutating admission that fluxhop's dry-run
probes read (cluster/lead_volume.py), for the fake API server's
``admission`` hooks. The proof that the real ones answer as these do is
tests/realk8s/test_lead_state.py, as a user of one namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fluxhop.render.pod import (
    LEAD_CLAIM_ANNOTATION,
    LEAD_CONTAINER_ANNOTATION,
    LEAD_STATE_POLICY,
    LEAD_STATE_VOLUME,
)
from fluxhop.spec.leadstate import LEAD_STATE_DIR
from fluxhop.workload.marks import COMPLETION_INDEX
from tests.cluster.fakeapi import FakeAPIServer

Admit = Callable[[str, dict[str, Any]], None]
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def default_storage_class(fake: FakeAPIServer) -> Admit:
    """DefaultStorageClass: a claim that names no class gets the default one."""

    def admit(kind: str, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        if kind != "PersistentVolumeClaim" or spec.get("storageClassName") is not None:
            return
        for (stored, _, name), found in fake.store.items():
            annotations = found["metadata"].get("annotations") or {}
            if stored == "StorageClass" and annotations.get(DEFAULT_CLASS) == "true":
                spec["storageClassName"] = name
                return

    return admit


def lead_state_policy(fake: FakeAPIServer) -> Admit:
    """deploy/lead-state.yaml's policy, once an admin has applied it: rank 0's
    pod of a MiniCluster with a claim gets the claim mounted."""

    def admit(kind: str, obj: dict[str, Any]) -> None:
        if kind != "Pod" or ("MutatingAdmissionPolicy", "", LEAD_STATE_POLICY) not in fake.store:
            return
        meta = obj["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        container = annotations.get(LEAD_CONTAINER_ANNOTATION)
        if (
            labels.get("app.kubernetes.io/managed-by") != "fluxhop"
            or labels.get(COMPLETION_INDEX) != "0"
            or LEAD_CLAIM_ANNOTATION not in annotations
        ):
            return
        volumes = obj["spec"].setdefault("volumes", [])
        if any(v["name"] == LEAD_STATE_VOLUME for v in volumes):
            return
        for each in obj["spec"]["containers"]:
            if each["name"] == container:
                volumes.append({"name": LEAD_STATE_VOLUME, "persistentVolumeClaim": {
                    "claimName": annotations[LEAD_CLAIM_ANNOTATION]}})  # fmt: skip
                mount = {"name": LEAD_STATE_VOLUME, "mountPath": LEAD_STATE_DIR}
                each.setdefault("volumeMounts", []).append(mount)

    return admit
