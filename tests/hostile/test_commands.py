"""Hostile flags and documents for every front door's command: `run`, `create`,
`render`, `hop` and `trainer render` - one line naming the flag or field, a
usage or input status, no traceback, no internal error."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.hostile.lines import one_line
from tests.trainer.conftest import EXAMPLES, documents

IMAGE = ["--image", "ubuntu:noble"]
RUN_FLAGS: list[tuple[list[str], str]] = [
    (["-N", "0"], "-N/--nodes"), (["-N", "-3"], "-N/--nodes"), (["-N", "x"], "'-N'"),
    (["-N", "2000000"], "100000"), (["-N", "1e3"], "'-N'"), (["-n", "0"], "-n/--ntasks"),
    (["-N", "4", "-n", "2"], "fewer tasks"), (["-c", "0"], "-c/--cores-per-task"),
    (["-c", "-1"], "-c"), (["-g", "-1"], "-g/--gpus-per-task"), (["-g", "x"], "'-g'"),
    (["--name", ""], "'--name'"), (["--name", "Bad_Name"], "'--name'"),
    (["--name", "../etc"], "'--name'"), (["--name", "a" * 70], "'--name'"),
    (["--namespace", "Bad NS"], "'--namespace'"), (["--namespace", ""], "'--namespace'"),
    (["--image", "a b"], "--image"), (["--image", "a\nb"], "--image"), (["--image", ""], "--image"),
    (["--image", "UPPER"], "--image"), (["--env", "=x"], "--env"), (["--env", "noequals"], "--env"),
    (["--env", "A\tB=x"], "--env"), (["--env", "Ä=x"], "--env"), (["--workdir", "rel"], "--workdir"),
    (["--cluster-domain", "bad domain"], "'--cluster-domain'"),
    (["--cluster-domain", "-x"], "'--cluster-domain'"), (["--max-size", "0"], "--max-size"),
    (["-N", "3", "--max-size", "2"], "--max-size"), (["--gpu-resource", "bad name", "-g", "1"], "--gpu-resource"),
    (["--target", "deployment"], "'--target'"), (["--output", "xml"], "'--output'"),
    (["--timeout", "soon"], "'--timeout'"), (["--request-timeout", "0"], "'--request-timeout'"),
    (["--request-timeout", "-5"], "'--request-timeout'"), (["--no-such-flag"], "--no-such-flag"),
    (["--queue", "Team A"], "--queue"), (["--queue", "a" * 64], "--queue"),
    (["--priority-class", "High!"], "--priority-class"), (["--topology", "required:"], "--topology"),
    (["--topology", "a b"], "--topology"), (["--node-selector", "nokey"], "--node-selector"),
    (["--node-selector", "=v"], "--node-selector"), (["--node-selector", "k=v v"], "--node-selector"),
    (["--toleration", "gpu"], "--toleration"), (["--toleration", "gpu:Always"], "--toleration"),
    (["--toleration", "=v:NoSchedule"], "--toleration"), (["--memory", "lots"], "--memory"),
    (["--memory", "-1Gi"], "--memory"), (["--memory", "1XB"], "--memory"), (["--cpu", "0"], "--cpu"),
    (["--cpu", "1e999999999"], "--cpu"), (["--pods-per-node", "0"], "--pods-per-node"),
    (["--pods-per-node", "x"], "'--pods-per-node'"), (["--service-account", "A_B"], "--service-account"),
    (["--image-pull-secret", "x/y"], "--image-pull-secret"), (["--pull-policy", "Sometimes"], "'--pull-policy'"),
    (["--security", "baseline"], "'--security'"),
    (["--health-check", "disk"], "--health-check"), (["--health-check", "Disk=x"], "--health-check"),
    (["--health-check", "disk= "], "--health-check"), (["--health-interval", "5"], "--health-interval"),
    (["--health-check", "a=x", "--health-interval", "0"], "--health-interval"),
]  # fmt: skip
HOP_FLAGS: list[tuple[list[str], str]] = [
    ([], "--rabbits"), (["--rabbits", ""], "rabbits"), (["--rabbits", "a", "--tasks", "0"], "tasks"),
    (["--rabbits", "a", "--tasks", "x"], "'--tasks'"), (["--rabbits", "a", "--nodes", "0"], "nodes"),
(["--rabbits", "a", "--env", "noequals"], "env"),
    (["--rabbits", "a", "--image", "a b"], "image"), (["--rabbits", "a", "--name", "Bad"], "'--name'"),
    (["--rabbits", "a", "--command", "lmp 'x"], "command"), (["--rabbits", "a", "--workdir", "rel"], "rel"),
    (["--rabbits", "a", "--pull-policy", "Sometimes"], "'--pull-policy'"),
    (["--rabbits", "Bad_Rabbit"], "Bad_Rabbit"),
    (["--rabbits", "a", "--cxi-resource", "bad name"], "bad name"),
    (["--rabbits", "a", "--pull-secret", "Bad_Secret"], "Bad_Secret"),
]  # fmt: skip


@pytest.mark.parametrize("verb", ["run", "create"])
@pytest.mark.parametrize(("flags", "words"), RUN_FLAGS, ids=[" ".join(f) for f, _ in RUN_FLAGS])
def test_hostile_job_flags(capsys, verb, flags, words):
    args = [verb, "--dry-run", *IMAGE, *flags, "--", "true"] if verb == "run" else None
    if verb == "create":  # create has no --dry-run: every one of these fails before a connection
        args = ["create", "--kubeconfig", "/nonexistent", *IMAGE, *flags]
        if flags[:1] in (["--output"], ["--timeout"]):
            pytest.skip("run-only flag")
    code, err = one_line(capsys, *args)
    assert code == 2 and words in err, err


@pytest.mark.parametrize(
    ("flags", "words"), HOP_FLAGS, ids=[" ".join(f) or "none" for f, _ in HOP_FLAGS]
)
def test_hostile_hop_flags(capsys, flags, words):
    code, err = one_line(capsys, "hop", *flags, "--dry-run")
    assert code == 2 and words in err, err


@pytest.mark.parametrize(
    ("flags", "words"),
    [(["--name", "Bad"], "'--name'"), (["--namespace", "a b"], "'--namespace'"),
     (["--target", "x"], "'--target'"), (["--cluster-domain", "a..b"], "'--cluster-domain'"),
     (["-f", "/nonexistent.yaml"], "File '/nonexistent.yaml' does not exist"), ([], "-f")],
)  # fmt: skip
def test_hostile_render_flags(capsys, tmp_path, flags, words):
    good = tmp_path / "mc.yaml"
    good.write_text(
        (EXAMPLES.parent / "operator-examples" / "tests__hello-world__minicluster.yaml").read_text()
    )
    base = [] if any(f == "-f" for f in flags) or not flags else ["-f", str(good)]
    code, err = one_line(capsys, "render", *base, *flags)
    assert code == 2 and words in err, err


def lammps() -> dict:
    (job,) = documents(EXAMPLES / "examples__flux__lammps-train-job.yaml")
    return job


def runtime() -> dict:
    (doc,) = documents(EXAMPLES / "examples__flux__flux-runtime.yaml")
    return doc


def node_job(r: dict) -> dict:
    return r["spec"]["template"]["spec"]["replicatedJobs"][0]


TRAINER: list[tuple[str, object, str]] = [
    ("spec-scalar", lambda j, r: j.update(spec=5), "spec"),
    ("spec-list", lambda j, r: j.update(spec=[]), "spec"),
    ("trainer-list", lambda j, r: j["spec"].update(trainer=[1]), "trainer"),
    ("nodes-bool", lambda j, r: j["spec"]["trainer"].update(numNodes=True), "numNodes"),
    ("nodes-string", lambda j, r: j["spec"]["trainer"].update(numNodes="2"), "numNodes"),
    ("nodes-zero", lambda j, r: j["spec"]["trainer"].update(numNodes=0), "numNodes"),
    ("nodes-huge", lambda j, r: j["spec"]["trainer"].update(numNodes=10**6), "numNodes"),
    ("procs-zero", lambda j, r: j["spec"]["trainer"].update(numProcPerNode=0), "numProcPerNode"),
    ("procs-string", lambda j, r: j["spec"]["trainer"].update(numProcPerNode="auto"), "numProcPerNode"),
    ("command-string", lambda j, r: j["spec"]["trainer"].update(command="lmp -in x"), "spec.trainer.command must be an array"),
    ("command-ints", lambda j, r: j["spec"]["trainer"].update(command=[1, 2]), "spec.trainer.command[0] must be a string"),
    ("env-scalar", lambda j, r: j["spec"]["trainer"].update(env=5), "env"),
    ("env-entry", lambda j, r: j["spec"]["trainer"].update(env=[5]), "env"),
    ("env-bad-name", lambda j, r: j["spec"]["trainer"].update(env=[{"name": "1\x7fX", "value": "a"}]), "1\\x7fX"),
    ("image-space", lambda j, r: j["spec"]["trainer"].update(image="a b"), "image"),
    ("resources-scalar", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode=5), "resources"),
    ("gpu-fraction", lambda j, r: j["spec"]["trainer"].update(resourcesPerNode={"limits": {"nvidia.com/gpu": "0.5"}}), "nvidia.com/gpu"),
    ("name-bad", lambda j, r: j["metadata"].update(name="Bad_Name"), "Bad_Name"),
    ("metadata-list", lambda j, r: j.update(metadata=[]), "metadata"),
    ("runtime-ref-list", lambda j, r: j["spec"].update(runtimeRef=[]), "runtimeRef"),
    ("jobs-scalar", lambda j, r: r["spec"]["template"]["spec"].update(replicatedJobs=5), "replicatedJobs"),
    ("jobs-entry", lambda j, r: r["spec"]["template"]["spec"].update(replicatedJobs=[5]), "replicatedJobs"),
    ("policy-scalar", lambda j, r: r["spec"].update(mlPolicy=5), "mlPolicy"),
    ("flux-policy-scalar", lambda j, r: r["spec"]["mlPolicy"].update(flux=5), "flux"),
    ("template-scalar", lambda j, r: node_job(r).update(template=5), "template"),
    ("containers-scalar", lambda j, r: node_job(r)["template"]["spec"]["template"]["spec"].update(containers=5), "containers"),
    ("network-device", lambda j, r: j["spec"]["trainer"]["env"].append({"name": "FLUX_NETWORK_DEVICE", "value": "eth0/1"}), "FLUX_NETWORK_DEVICE"),
    ("queue-policy", lambda j, r: j["spec"]["trainer"]["env"].append({"name": "FLUX_QUEUE_POLICY", "value": "lifo"}), "FLUX_QUEUE_POLICY"),
    ("view-image", lambda j, r: j["spec"]["trainer"]["env"].append({"name": "FLUX_VIEW_IMAGE", "value": "a b"}), "FLUX_VIEW_IMAGE"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "mutate", "words"), TRAINER, ids=[t[0] for t in TRAINER])
def test_hostile_trainjobs(capsys, tmp_path, case, mutate, words):
    job, run = copy.deepcopy(lammps()), copy.deepcopy(runtime())
    mutate(job, run)  # type: ignore[operator]
    files = []
    for name, doc in (("job.yaml", job), ("runtime.yaml", run)):
        (tmp_path / name).write_text(
            json.dumps(doc) if case.endswith("-json") else yaml.safe_dump(doc)
        )
        files.append(str(tmp_path / name))
    code, err = one_line(capsys, "trainer", "render", "-f", files[0], "--runtime", files[1])
    assert code == 2 and words in err, err
