"""The TrainJob and runtime screen: its tables are the Trainer CRDs' own
fields, an unknown key is a one-line error naming the closest field (as
kubectl's strict field validation refuses it), and a field fluxhop does not
act on is a warning."""

from __future__ import annotations

import copy
import warnings

import pytest
import yaml

from fluxhop.errors import FluxhopWarning
from fluxhop.trainer import TrainerError, build
from fluxhop.trainer.fields import RUNTIME_FIELDS, TRAINJOB_FIELDS
from tests.schemas import crd_path, validate
from tests.trainer.conftest import CERT, EXAMPLES, documents, flux_runtime, trainjob

FLUX_TRAINJOBS = [
    p
    for p in sorted(EXAMPLES.glob("examples__flux__*.yaml"))
    if documents(p)[0]["kind"] == "TrainJob"
]


def crd_properties(kind: str, path: str) -> set[str]:
    crd = yaml.safe_load(crd_path("trainer.kubeflow.org", kind).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    node = version["schema"]["openAPIV3Schema"]
    for part in path.split("."):
        node = node["properties"][part]
    return set(node["properties"])


@pytest.mark.parametrize("path", sorted(TRAINJOB_FIELDS))
def test_the_trainjob_table_is_the_crds(path):
    assert set(TRAINJOB_FIELDS[path]) == crd_properties("TrainJob", path)


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
@pytest.mark.parametrize("path", sorted(RUNTIME_FIELDS))
def test_the_runtime_table_is_the_crds(kind, path):
    assert set(RUNTIME_FIELDS[path]) == crd_properties(kind, path)


@pytest.mark.parametrize("path", FLUX_TRAINJOBS, ids=lambda p: p.name)
def test_the_upstream_examples_pass_quietly(path):
    (job,) = documents(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build(job, flux_runtime(), cert=CERT) is not None


@pytest.mark.parametrize(
    ("where", "key", "message"),
    [
        (
            ("spec", "trainer"),
            "numProcPerNod",
            'TrainJob demo: unknown field "spec.trainer.numProcPerNod"; '
            'did you mean "numProcPerNode"?',
        ),
        (
            ("spec",),
            "trainr",
            'TrainJob demo: unknown field "spec.trainr"; did you mean "trainer"?',
        ),
        (
            ("spec", "runtimeRef"),
            "uid",
            'TrainJob demo: unknown field "spec.runtimeRef.uid"; known: apiGroup, kind, name',
        ),
    ],
)
def test_an_unknown_trainjob_field_is_one_line_naming_the_closest(where, key, message):
    job = trainjob(numNodes=2)
    node = job
    for part in where:
        node = node.setdefault(part, {})
    node[key] = 4
    with pytest.raises(TrainerError) as err:
        build(job, flux_runtime(), cert=CERT)
    assert str(err.value) == message


def test_an_unknown_runtime_field_is_refused_too():
    runtime = copy.deepcopy(flux_runtime())
    runtime["spec"]["mlPolicy"]["flux"]["numProcsPerNode"] = 2
    with pytest.raises(TrainerError, match=r'unknown field "spec.mlPolicy.flux.numProcsPerNode"; '):
        build(trainjob(numNodes=1), runtime, cert=CERT)


def test_a_field_fluxhop_does_not_act_on_warns_when_it_is_set():
    job = trainjob(numNodes=1)
    job["spec"]["activeDeadlineSeconds"] = 3600
    with pytest.warns(
        FluxhopWarning, match=r"TrainJob demo: spec.activeDeadlineSeconds is ignored"
    ):
        build(job, flux_runtime(), cert=CERT)
    job["spec"]["activeDeadlineSeconds"] = None  # not set: nothing to act on
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(job, flux_runtime(), cert=CERT)


@pytest.mark.parametrize("suspend", [True, False, None])
def test_the_jobset_mirrors_suspend_as_the_trainers_builder_does(suspend):
    job = trainjob(numNodes=1)
    if suspend is not None:
        job["spec"]["suspend"] = suspend
    jobset = build(job, flux_runtime(), cert=CERT)[-1]
    assert jobset["spec"].get("suspend") is suspend
    validate(jobset)  # the JobSet CRD's own spec.suspend


def test_suspend_must_be_a_boolean():
    job = trainjob(numNodes=1)
    job["spec"]["suspend"] = "yes"
    with pytest.raises(
        TrainerError, match=r"spec.suspend must be a boolean \(true or false\), not string"
    ):
        build(job, flux_runtime(), cert=CERT)


def test_a_kueue_queue_label_says_it_does_not_queue_here():
    job = trainjob(numNodes=1)
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "training-queue"}
    with pytest.warns(FluxhopWarning, match=r"label kueue.x-k8s.io/queue-name is ignored: "):
        build(job, flux_runtime(), cert=CERT)
