"""Absurd sizes, on every door: cores, GPUs, tasks, memory and time past what
any node or job has (flux/limits.py), and quantities whose exponent makes
them meaningless. Each is one line naming the flag or field, exit 2, and
nothing is sent to the API server; the largest sizes a real node has pass."""

from __future__ import annotations

import copy
import json
import math

import pytest
import yaml

from fluxhop.cli import main
from fluxhop.errors import FluxhopError
from fluxhop.flux import jobspec
from fluxhop.flux.limits import MAX_CORES_PER_NODE, MAX_GPUS_PER_NODE
from fluxhop.rabbit.request import RabbitRequest
from tests.hostile.corpus import base
from tests.hostile.lines import one_line
from tests.hostile.test_trainer_shapes import refused_before_sending

FLAGS: list[tuple[list[str], str]] = [
    (["-c", "5000"], "-c/--cores-per-task"),
    (["-c", "99999999999999999999"], "-c/--cores-per-task"),
    (["-N", "2", "-n", "8", "-c", "1025"], "4100 cores"),
    (["-g", "65"], "-g/--gpus-per-task"),
    (["-g", "1000000000000"], "-g/--gpus-per-task"),
    (["-n", "1000000000"], "tasks per node"),
    (["--gpu-resource", "cpu", "-g", "2"], "--gpu-resource"),
    (["--cpu", "5000"], "--cpu"),
    (["--cpu", "1e400"], "--cpu"),
    (["--cpu", "1E999"], "--cpu"),
    (["--cpu", "1e-400"], "--cpu"),
    (["--cpu", "0.0000000001"], "--cpu"),
    (["--memory", "1e400"], "--memory"),
    (["--memory", "9Ei"], "--memory"),
    (["--memory", "100Ti"], "--memory"),
    (["-t", "1e400"], "-t"),
    (["-t", "99999999999999999999d"], "-t"),
    (["--flux-args", "-c 1000000"], "-c 1000000"),
]
LARGEST = [
    ["-c", str(MAX_CORES_PER_NODE)],
    ["-g", str(MAX_GPUS_PER_NODE)],
    ["--cpu", "4096", "--memory", "64Ti"],
    ["--memory", "9E"],  # 9 * 10^18 bytes is a quantity; the node bound judges it
]


@pytest.mark.parametrize(("flags", "words"), FLAGS, ids=[" ".join(f) for f, _ in FLAGS])
def test_flags(cli_cluster, kubeconfig, capsys, flags, words):
    args = ["run", "--kubeconfig", str(kubeconfig), "--image", "ubuntu", *flags, "--", "true"]
    code, err = one_line(capsys, *args)
    assert code == 2 and words in err, err
    assert cli_cluster.requests == []


@pytest.mark.parametrize("flags", LARGEST[:3], ids=" ".join)
def test_the_largest_node_is_accepted(capsys, flags):
    assert main(["run", "--dry-run", "--image", "ubuntu", *flags, "--", "true"]) == 0
    assert "kind: Job" in capsys.readouterr().out


def test_a_big_binary_quantity_is_not_read_as_an_exponent(capsys):
    code, err = one_line(capsys, "run", "--dry-run", "--image", "ubuntu", *LARGEST[3], "--", "true")
    assert code == 2 and "more memory than any node has" in err, err


C = ("spec", "containers", 0)
FILES: list[tuple[str, tuple, object, str]] = [
    ("cpu-exponent", (*C, "resources"), {"limits": {"cpu": "1e400"}}, "cpu"),
    ("cpu-huge-int", (*C, "resources"), {"limits": {"cpu": 10**30}}, "cpu"),
    ("cpu-past-a-node", (*C, "resources"), {"requests": {"cpu": 5000}}, "more CPUs than any node"),
    ("cpu-inf", (*C, "resources"), {"limits": {"cpu": math.inf}}, "finite"),
    ("cpu-nan", (*C, "resources"), {"limits": {"cpu": math.nan}}, "finite"),
    ("cpu-tiny", (*C, "resources"), {"limits": {"cpu": "1e-400"}}, "1n"),
    ("gpu-exponent", (*C, "resources"), {"limits": {"nvidia.com/gpu": "1e400"}}, "nvidia.com/gpu"),
    ("gpu-past-a-node", (*C, "resources"), {"limits": {"amd.com/gpu": 65}}, "more GPUs"),
    ("memory-past-a-node", (*C, "resources"), {"limits": {"memory": "99999Pi"}}, "memory"),
    ("hugepages-exponent", (*C, "resources"), {"limits": {"hugepages-2Mi": "1e400"}}, "hugepages-2Mi"),
    ("tasks", ("spec", "tasks"), 10**30, "spec.tasks"),
    ("deadline", ("spec", "deadlineSeconds"), 10**30, "spec.deadlineSeconds"),
    ("backoff", ("spec", "backoffLimit"), 10**30, "spec.backoffLimit"),
    ("option-cores", ("spec", "flux", "optionFlags"), "-c 1000000", "-c 1000000"),
    ("option-gpus", ("spec", "flux", "optionFlags"), "--gpus-per-task=10000", "-g 10000"),
    ("option-time", ("spec", "flux", "optionFlags"), "-t 1e400", "-t"),
    ("option-no-cores", ("spec", "flux", "optionFlags"), "-c 0", "1 or more cores"),
    ("connect-timeout", ("spec", "flux", "connectTimeout"), "1e400s", "connectTimeout"),
]  # fmt: skip


def put(doc: dict, keys: tuple, value: object) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    for key in keys[:-1]:
        node = node[key] if isinstance(node, list) else node.setdefault(key, {})
    node[keys[-1]] = value
    return doc


@pytest.mark.parametrize(("case", "keys", "value", "words"), FILES, ids=[f[0] for f in FILES])
def test_files(cli_cluster, kubeconfig, capsys, tmp_path, case, keys, value, words):
    path = tmp_path / "mc.yaml"
    path.write_text(yaml.safe_dump(put(base(), keys, value)))  # YAML: .inf and .nan kept
    for verb in (["render"], ["run", "--kubeconfig", str(kubeconfig)]):
        code, err = one_line(capsys, *verb, "-f", str(path))
        assert code == 2 and words in err, err
    assert cli_cluster.requests == []


JOBSPECS: list[tuple[str, dict, str]] = [
    ("cores", {"cores_per_task": 10**6}, "core count past 4096"),
    ("gpus", {"gpus_per_task": 10**4}, "gpu count past 64"),
    ("tasks", {"ntasks": 10**30}, "slot count past"),
    ("duration-nan", {"duration": math.nan}, "duration"),
    ("duration-inf", {"duration": math.inf}, "duration"),
    ("duration-huge", {"duration": 1e300}, "duration"),
]


@pytest.mark.parametrize(("case", "options", "words"), JOBSPECS, ids=[j[0] for j in JOBSPECS])
def test_jobspecs(case, options, words):
    with pytest.raises(FluxhopError) as info:
        jobspec.from_command(["hostname"], **options)
    assert "\n" not in str(info.value) and words in str(info.value)


def test_a_jobspec_file_with_a_huge_count_is_one_line():
    text = json.dumps(jobspec.from_command(["hostname"], cores_per_task=2).to_dict())
    with pytest.raises(FluxhopError, match="core count past 4096"):
        jobspec.load(text.replace('"count": 2', '"count": 100000000000000000000'))


TRAINJOBS: list[tuple[str, object, str]] = [
    ("procs", lambda j, r: j["spec"]["trainer"].update(numProcPerNode=10**6), "spec.trainer.numProcPerNode"),
    ("runtime-procs", lambda j, r: (j["spec"]["trainer"].pop("numProcPerNode", None), r["spec"]["mlPolicy"]["flux"].update(numProcPerNode=10**30)), "mlPolicy.flux.numProcPerNode"),
    ("cpu-exponent", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"cpu": "1e400"}}), "spec.trainer.resourcesPerNode.limits.cpu"),
    ("cpu-tiny", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"cpu": "1e-400"}}), "1n"),
    ("memory-exponent", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"memory": "1E999"}}), "memory"),
    ("gpus-past-a-node", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"nvidia.com/gpu": 10000}}), "more GPUs"),
    ("gpus-exponent", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"nvidia.com/gpu": "1e400"}}), "nvidia.com/gpu"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "mutate", "words"), TRAINJOBS, ids=[t[0] for t in TRAINJOBS])
def test_trainjobs(cli_cluster, kubeconfig, capsys, tmp_path, case, mutate, words):
    refused_before_sending(cli_cluster, kubeconfig, capsys, tmp_path, mutate, words)


@pytest.mark.parametrize("tasks", ["10000", "1000000000", "100000000000000000000000"])
def test_hop_tasks_past_the_rabbits_cores(capsys, tasks):
    code, err = one_line(capsys, "hop", "--rabbits", "r1,r2", "--tasks", tasks, "--dry-run")
    assert code == 2 and "tasks" in err, err


@pytest.mark.parametrize("tasks", [10_000, 10**30, "99999999999999999999"])
def test_a_rabbit_jobspec_with_absurd_tasks_is_one_line(tasks):
    request = RabbitRequest.from_jobspec(
        {"attributes": {"system": {"rabbit": {"mpi": {"tasks": tasks}}}}}
    )
    with pytest.raises(FluxhopError) as info:
        request.to_minicluster(["r1", "r2"], name="x", namespace="default", uid=1000, gid=1000)
    assert "\n" not in str(info.value) and "tasks" in str(info.value)
