"""The Kubeflow Trainer Flux plugin's own test cases
(``trainer-examples/flux_plugin_vectors.json``), held against fluxhop.

Where fluxhop deliberately differs from the plugin, the test says so and
checks fluxhop's behaviour instead; everything else must match.
"""

from __future__ import annotations

import base64

import pytest

from fluxhop.errors import CurveCertError
from fluxhop.flux import hostlist, idset
from fluxhop.flux.curve import CurveCert, z85_encode
from fluxhop.render.bundle import Layout
from fluxhop.render.jobset import host_prefix
from fluxhop.trainer import build
from fluxhop.trainer.plan import plan
from tests.conformance import by_op, load_vectors
from tests.trainer.conftest import node_pod

VECTORS = by_op(load_vectors("trainer-examples/flux_plugin_vectors.json"))


def test_every_op_is_covered():
    assert set(VECTORS) == {
        "generateRange",
        "generateHostlist",
        "encodeZ85",
        "buildCurveSecret",
        "getOriginalCommand",
        "validate",
        "enforceMLPolicy+build",
    }


def runtime_from(vector_runtime: dict | None, policy) -> dict:
    """A ClusterTrainingRuntime document from a vector's runtime sketch."""
    jobs = (vector_runtime or {}).get("replicatedJobs") or [
        {"name": "node", "containers": [{"name": "node"}]}
    ]
    replicated = [
        {
            "name": job["name"],
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {"image": "ubuntu:jammy", **c} for c in job["containers"]
                            ]
                        }
                    }
                },
            },
        }
        for job in jobs
    ]
    ml_policy: dict = {"numNodes": 1}
    if policy:
        ml_policy["flux"] = policy if isinstance(policy, dict) else {}
    else:
        ml_policy["torch"] = {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {"mlPolicy": ml_policy, "template": {"spec": {"replicatedJobs": replicated}}},
    }


def trainjob_from(sketch: dict) -> dict:
    meta = {k: sketch[k] for k in ("name", "namespace", "uid") if k in sketch}
    spec: dict = {"runtimeRef": {"name": "rt"}}
    if "trainer" in sketch:
        spec["trainer"] = sketch["trainer"]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta,
        "spec": spec,
    }


@pytest.mark.parametrize("vector", VECTORS["generateRange"], ids=lambda v: v["id"])
def test_generate_range(vector):
    start, size = vector["input"]["start"], vector["input"]["size"]
    assert idset.encode(range(start, start + size)) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["generateHostlist"], ids=lambda v: v["id"])
def test_generate_hostlist(vector):
    """fluxhop writes one host without brackets (``x-node-0-0``, not
    ``x-node-0-[0]``): a deliberate, equivalent spelling - both decode to the
    same hosts, which is what the broker reads."""
    prefix, size = vector["input"]["prefix"], vector["input"]["size"]
    ours = Layout(host_prefix(prefix), prefix, "default").hostlist(size)
    assert hostlist.decode(ours) == hostlist.decode(vector["expected"])
    if size > 1:
        assert ours == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["encodeZ85"], ids=lambda v: v["id"])
def test_encode_z85(vector):
    data = bytes.fromhex(vector["input"]["bytes_hex"])
    if vector["expected"]["length"] == 0 and data:
        # Deliberate: the plugin returns "" for a length that is not a
        # multiple of 4, which would write an empty key; fluxhop refuses.
        with pytest.raises(CurveCertError, match="multiple of 4"):
            z85_encode(data)
        return
    assert len(z85_encode(data)) == vector["expected"]["length"]


@pytest.mark.parametrize("vector", VECTORS["buildCurveSecret"], ids=lambda v: v["id"])
def test_build_curve_secret(vector):
    job = trainjob_from(vector["input"]["trainjob"])
    expected = vector["expected"]

    def secret_text() -> tuple[dict, str]:
        secret = build(job, runtime_from(None, {"numProcPerNode": 1}))[1]
        return secret, base64.b64decode(secret["data"][expected["data_key"]]).decode()

    secret, text = secret_text()
    assert secret["metadata"]["name"] == expected["secret_name"]
    for fragment in expected["cert_contains"]:
        assert fragment in text
    CurveCert.from_zpl(text)  # and flux's reader rules accept it
    # Deliberate: the plugin derived the key from the TrainJob UID
    # (deterministic_for_same_uid); fluxhop's key is random, so the same UID
    # gives a different key every time and a UID reveals nothing.
    assert expected["deterministic_for_same_uid"] and expected["differs_for_different_uid"]
    assert secret_text()[1] != text


@pytest.mark.parametrize("vector", VECTORS["getOriginalCommand"], ids=lambda v: v["id"])
def test_original_command(vector):
    """Deliberate: fluxhop keeps argv as a list (the plugin joined it into one
    string); joined with spaces it reads as the plugin's string."""
    job = trainjob_from({"name": "t", "trainer": dict(vector["input"])})
    resolved = plan(job, runtime_from(None, {"numProcPerNode": 1}))
    assert resolved.argv == [*vector["input"]["command"], *vector["input"]["args"]]
    assert " ".join(resolved.argv) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["validate"], ids=lambda v: v["id"])
def test_validate(vector):
    runtime = runtime_from(None, vector["input"]["flux_policy"])
    job = trainjob_from({"name": "v", "trainer": {"numNodes": 1}})
    objects = build(job, runtime)  # no error in either case
    assert (objects is None) is (not vector["input"]["flux_policy"])
    assert vector["expected"]["errors"] == []


@pytest.mark.parametrize("vector", VECTORS["enforceMLPolicy+build"], ids=lambda v: v["id"])
def test_enforce_and_build(vector):
    given = vector["input"]
    runtime = runtime_from(given.get("runtime"), given["flux_policy"])
    job = trainjob_from(given["trainjob"])
    objects = build(job, runtime)
    expected = vector["expected"]
    if not given["flux_policy"]:
        assert objects is None and expected["objects"] == []
        return
    pod = node_pod(objects)
    want = expected["podSet_node"]
    assert pod["initContainers"] == want["initContainers"]
    # Deliberate: no spack-install emptyDir at /opt/software, which the
    # plugin's entrypoint filled with a second copy of the view's software,
    # as root only; the installer's copy is mounted there read-only instead.
    assert pod["volumes"] == [v for v in want["volumes"] if v["name"] != "spack-install"]
    software = {"name": "flux-install", "mountPath": "/opt/software", "subPath": "software",
                "readOnly": True}  # fmt: skip
    (container,) = pod["containers"]
    mounts = container["volumeMounts"]
    # Deliberate: /dev/shm is writable (the plugin mounted it read-only).
    plugin_mounts = [
        software
        if m["name"] == "spack-install"
        else {k: v for k, v in m.items() if not (m["mountPath"] == "/dev/shm" and k == "readOnly")}
        for m in want["containers"][0]["volumeMounts"]
    ]
    assert mounts == plugin_mounts
    by_kind = {o["kind"]: o for o in objects}
    for wanted in expected["objects"]:
        obj = by_kind[wanted["kind"]]
        assert obj["metadata"]["name"] == wanted["name"]
        assert obj["metadata"]["namespace"] == wanted["namespace"]
        assert obj["metadata"]["ownerReferences"] == [wanted["ownerReference"]]
    # The JobSet, applied by the Trainer's JobSet plugin upstream, carries it too.
    assert by_kind["JobSet"]["metadata"]["ownerReferences"] == [
        expected["objects"][0]["ownerReference"]
    ]
