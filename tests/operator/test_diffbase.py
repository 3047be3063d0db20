"""kopf's record of what it last handled, as a digest (operator/diffbase.py):
small whatever the spec, the resource unchanged while it matches, a change
once it does not, and an older operator's record (the spec) still read."""

from __future__ import annotations

import copy
import json

import kopf
from kopf._cogs.structs import bodies, diffs

from fluxhop.operator.diffbase import DIGEST, OwnDiffBase

KEY = "fluxhop.io/last-handled-configuration"


def storage() -> OwnDiffBase:
    return OwnDiffBase(prefix="fluxhop.io", key="last-handled-configuration")


def resource(command: str, **spec) -> dict:
    return {"apiVersion": "flux-framework.org/v1alpha2", "kind": "MiniCluster",
            "metadata": {"name": "m", "namespace": "ns", "annotations": {}},
            "spec": {"size": 2, "containers": [{"image": "x", "command": command}], **spec}}  # fmt: skip


def stored(raw: dict) -> dict:
    """``raw`` with the record kopf's handling of it leaves."""
    patch = kopf.Patch()
    kept = storage()
    kept.store(body=bodies.Body(raw), patch=patch, essence=kept.build(body=bodies.Body(raw)))
    out = copy.deepcopy(raw)
    out["metadata"]["annotations"].update(patch.get("metadata", {}).get("annotations", {}))
    return out


def changed(raw: dict) -> bool:
    """What kopf decides: a diff between the record and the resource."""
    kept = storage()
    old = kept.fetch(body=bodies.Body(raw))
    return bool(diffs.diff(old, kept.build(body=bodies.Body(raw))))


def test_the_record_is_a_digest_whatever_the_spec():
    big = stored(resource("echo " + "x" * (1 << 20)))
    record = big["metadata"]["annotations"][KEY]
    assert record.startswith(DIGEST) and len(record) < 100


def test_unchanged_while_the_digest_matches_and_changed_once_it_does_not():
    raw = stored(resource("hostname"))
    assert not changed(raw)
    raw["metadata"]["labels"] = {"a": "b"}  # part of what kopf records
    assert changed(raw)
    raw = stored(resource("hostname"))
    raw["spec"]["size"] = 3
    assert changed(raw)


def test_an_older_operators_record_is_read_as_kopf_reads_it():
    raw = resource("hostname")
    essence = storage().build(body=bodies.Body(raw))
    raw["metadata"]["annotations"][KEY] = json.dumps(essence, separators=(",", ":")) + "\n"
    assert not changed(raw)
    raw["spec"]["size"] = 3
    assert changed(raw)


def test_nothing_is_recorded_on_another_controllers_resource():
    raw = resource("hostname", managedBy="kueue.x-k8s.io/multikueue")
    assert KEY not in stored(raw)["metadata"]["annotations"]
