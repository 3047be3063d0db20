"""Hostile Trainer documents, by category: every field of an upstream flux
TrainJob and its runtime given a value of the wrong JSON type, a required
field taken away, an unknown field added. Each is one line naming the field
path and the type expected (as the API server would put it), from `trainer
render` and `trainer run` alike, and `trainer run` sends nothing."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from fluxhop.trainer.schema import _schema
from tests.hostile.lines import one_line
from tests.hostile.test_commands import lammps, runtime

# a value of another JSON type for each type the schema names
WRONG = {
    "object": ["a string", ["a", "list"]],
    "array": ["a string", {"a": "mapping"}],
    "string": [5, ["a"], {"a": "b"}],
    "integer": ["2", 1.5, True],
    "number": ["2"],
    "boolean": ["yes", 1],
}
EXPECTED = {
    "object": "must be an object",
    "array": "must be an array",
    "string": "must be a string",
    "integer": "must be an integer",
    "number": "must be a number",
    "boolean": "must be a boolean",
}


def fields(doc: Any, schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, Any, str]]:
    """(path, key path, schema type) of every field the document sets."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            sub = (schema.get("properties") or {}).get(key) or schema.get("additionalProperties")
            if isinstance(sub, dict):
                where = f"{path}.{key}" if path else key
                yield from _field(value, sub, where, (key,))
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _field(item, schema.get("items") or {}, f"{path}[{i}]", (i,))


def _field(value, sub, where, key) -> Iterator[tuple[str, Any, str]]:
    if "type" in sub and not sub.get("x-kubernetes-int-or-string"):
        yield where, key, sub["type"]
    for inner, keys, kind in fields(value, sub, where):
        yield inner, (*key, *keys), kind


def rich() -> tuple[dict[str, Any], dict[str, Any]]:
    """The upstream LAMMPS TrainJob and flux runtime, with the parts the issue
    names that they leave out (labels, a subdomain, volumes, resources)."""
    job, run = copy.deepcopy(lammps()), copy.deepcopy(runtime())
    job["metadata"].update(labels={"team": "a"}, annotations={"note": "x"})
    job["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"cpu": "2", "memory": "1Gi"}}
    spec = run["spec"]["template"]["spec"]
    spec["network"] = {"subdomain": "lammps", "publishNotReadyAddresses": True}
    run["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    pod = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return job, run


def cases() -> list[tuple[str, str, tuple, Any, str]]:
    found = []
    job, run = rich()
    for which, doc, kind in (("job", job, "TrainJob"), ("runtime", run, "TrainingRuntime")):
        for path, keys, json_type in fields(doc, _schema(kind)):
            if path in ("apiVersion", "kind"):
                continue  # checked before the schema, with their own words
            for value in WRONG[json_type]:
                found.append((which, path, keys, value, json_type))
    return found


CASES = cases()


def put(doc: Any, keys: tuple, value: Any) -> None:
    for key in keys[:-1]:
        doc = doc[key]
    doc[keys[-1]] = value


def write(tmp_path, job: dict, run: dict) -> list[str]:
    files = []
    for name, doc in (("job.yaml", job), ("runtime.yaml", run)):
        (tmp_path / name).write_text(yaml.safe_dump(doc))
        files.append(str(tmp_path / name))
    return files


def test_the_rich_documents_render(capsys, tmp_path):
    files = write(tmp_path, *rich())
    from fluxhop.cli import main

    assert main(["trainer", "render", "-f", files[0], "--runtime", files[1]]) == 0


def test_the_corpus_covers_the_parts_named_in_the_issue():
    paths = {path for _, path, *_ in CASES}
    for part in (
        "labels",
        "subdomain",
        "containers",
        "volumes",
        "env",
        "resources",
        "replicatedJobs",
    ):
        assert any(part in path for path in paths), part
    assert len(CASES) > 100


@pytest.mark.parametrize(
    ("which", "path", "keys", "value", "json_type"),
    CASES,
    ids=[f"{c[0]}:{c[1]}={c[3]!r}" for c in CASES],
)
def test_a_wrong_type_is_one_line_naming_the_field(
    capsys, tmp_path, which, path, keys, value, json_type
):
    job, run = rich()
    put(job if which == "job" else run, keys, value)
    files = write(tmp_path, job, run)
    code, err = one_line(capsys, "trainer", "render", "-f", files[0], "--runtime", files[1])
    assert code == 2, err
    assert EXPECTED[json_type] in err, err
    assert f"{path} must be" in err, err


REQUIRED_AND_UNKNOWN: list[tuple[str, Any, str]] = [
    ("container-name", lambda j, r: r["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0].pop("name"), "containers[0].name is required"),
    ("env-name", lambda j, r: j["spec"]["trainer"]["env"].append({"value": "x"}), "spec.trainer.env[1].name is required"),
    ("unknown-pod-field", lambda j, r: r["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].update(hostNetwrk=True), '"hostNetwork"'),
    ("unknown-top", lambda j, r: j.update(specs={}), 'unknown field "specs"'),
    ("bad-quantity", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"cpu": "lots"}}), "not a quantity"),
    ("name-number", lambda j, r: j["metadata"].update(name=123), "metadata.name must be a string, not integer"),
    ("label-number", lambda j, r: j["metadata"].update(labels={"a": 1}), "metadata.labels.a must be a string"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "mutate", "words"), REQUIRED_AND_UNKNOWN, ids=[c[0] for c in REQUIRED_AND_UNKNOWN]
)
def test_trainer_run_refuses_before_sending(
    cli_cluster, kubeconfig, capsys, tmp_path, case, mutate, words
):
    refused_before_sending(cli_cluster, kubeconfig, capsys, tmp_path, mutate, words)


def refused_before_sending(cli_cluster, kubeconfig, capsys, tmp_path, mutate, words) -> None:
    """``mutate`` of the rich documents is one line with ``words`` from
    `trainer render` and `trainer run` alike, and nothing reaches the server."""
    job, run = rich()
    mutate(job, run)
    files = write(tmp_path, job, run)
    for verb in (["render"], ["run", "--kubeconfig", str(kubeconfig)]):
        code, err = one_line(capsys, "trainer", *verb, "-f", files[0], "--runtime", files[1])
        assert code == 2 and words in err, err
    assert cli_cluster.requests == []
