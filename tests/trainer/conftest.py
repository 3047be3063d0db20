"""Inputs for the Kubeflow Trainer tests: the upstream examples and a
builder for synthetic TrainJob/runtime pairs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from fluxhop.flux.curve import CurveCert
from tests.conformance import CONFORMANCE

EXAMPLES = CONFORMANCE / "trainer-examples"
CERT = CurveCert.generate("cert-for-tests")


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def flux_runtime() -> dict:
    (runtime,) = documents(EXAMPLES / "examples__flux__flux-runtime.yaml")
    return runtime


def trainjob(name="demo", runtime="flux-distributed", **trainer) -> dict:
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"runtimeRef": {"name": runtime}},
    }
    if trainer:
        job["spec"]["trainer"] = trainer
    return job


def runtime_with(**changes) -> dict:
    """The upstream flux runtime with ``node`` container / policy changes."""
    runtime = copy.deepcopy(flux_runtime())
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    for key, value in changes.items():
        if key == "policy":
            runtime["spec"]["mlPolicy"].update(value)
        elif key == "network":
            runtime["spec"]["template"]["spec"]["network"] = value
        else:
            container[key] = value
    return runtime


def node_pod(objects: list[dict]) -> dict:
    jobset = objects[-1]
    job = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node")
    return job["template"]["spec"]["template"]["spec"]


def node_container(objects: list[dict]) -> dict:
    return next(c for c in node_pod(objects)["containers"] if c["name"] == "node")


@pytest.fixture
def runtime() -> dict:
    return flux_runtime()
