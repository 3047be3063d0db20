"""The structural check of TrainJobs and runtimes: its schemas are the
Trainer CRDs' (regenerated and compared), every upstream example passes it,
and it applies the API server's rules - types, int-or-string, quantities,
required fields, unknown fields, nulls dropped, preserved subtrees kept."""

from __future__ import annotations

import pytest

from fluxhop.trainer import TrainerError
from fluxhop.trainer.schema import check_document, problem_of
from tests.schemas import validate
from tests.trainer import schema_source
from tests.trainer.conftest import EXAMPLES, documents

UPSTREAM = [
    (path.name, i, doc)
    for path in sorted(EXAMPLES.glob("*.yaml"))
    for i, doc in enumerate(documents(path))
    if doc.get("kind") in ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime")
]


@pytest.mark.parametrize("name", sorted(schema_source.FILES))
def test_the_committed_schemas_are_made_from_the_crds(name):
    committed = (schema_source.TARGET / name).read_text()
    assert committed == schema_source.text(schema_source.FILES[name]), (
        "run python -m tests.trainer.schema_source and commit the result"
    )


@pytest.mark.parametrize(
    ("path", "index", "doc"), UPSTREAM, ids=[f"{p}#{i}" for p, i, _ in UPSTREAM]
)
def test_every_upstream_document_passes(path, index, doc):
    validate(doc)  # the CRD's full schema says it is good ...
    check_document(doc)  # ... so the structural check must too


INT_OR_STRING = {"x-kubernetes-int-or-string": True, "pattern": r"^[0-9]+[a-zA-Z]*$"}
OBJECT = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "amount": INT_OR_STRING,
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "open": {"type": "object"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"name": "a"}, None),
        ({"name": "a", "count": 2, "ratio": 2, "amount": 3}, None),
        ({"name": "a", "amount": "4Gi"}, None),
        ({"name": "a", "count": None, "labels": None}, None),  # nulls are dropped
        ({"name": "a", "free": {"x": {"y": [1]}}, "open": {"z": 1}}, None),
        ({"name": "a", "items": ["x", None]}, None),
        ([], "the document must be an object (a mapping), not array"),
        ({}, "name is required"),
        ({"name": None}, "name is required"),
        ({"name": 5}, "name must be a string, not integer"),
        ({"name": "a", "count": True}, "count must be an integer, not boolean"),
        ({"name": "a", "count": 1.5}, "count must be an integer, not number"),
        ({"name": "a", "ratio": "1"}, "ratio must be a number, not string"),
        ({"name": "a", "amount": 1.5}, "amount must be an integer or a string, not number"),
        ({"name": "a", "amount": "lots"}, "amount is 'lots', not a quantity (e.g. 500m, 2, 4Gi)"),
        ({"name": "a", "labels": {"k": 1}}, "labels.k must be a string, not integer"),
        ({"name": "a", "items": ["x", 2]}, "items[1] must be a string, not integer"),
        ({"name": "a", "cuont": 1}, 'unknown field "cuont"; did you mean "count"?'),
    ],
)
def test_the_rules(value, problem):
    assert problem_of(value, OBJECT) == problem


def test_a_document_deeper_than_its_schema_costs_nothing():
    deep: dict = {}
    node = deep
    for _ in range(50_000):
        node["x"] = {}
        node = node["x"]
    assert problem_of({"name": "a", "free": deep}, OBJECT) is None
    assert problem_of({"name": "a", "open": deep}, OBJECT) is None


def test_the_error_names_the_document():
    with pytest.raises(
        TrainerError, match=r"^TrainJob demo: spec.trainer.numNodes must be an integer"
    ):
        check_document(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "demo"},
                "spec": {"runtimeRef": {"name": "r"}, "trainer": {"numNodes": "2"}},
            }
        )
