"""`fluxhop trainer render|run` with the upstream Kubeflow examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fluxhop.cli import main
from tests.schemas import validate
from tests.trainer.conftest import EXAMPLES

RUNTIME = str(EXAMPLES / "examples__flux__flux-runtime.yaml")
LAMMPS = str(EXAMPLES / "examples__flux__lammps-train-job.yaml")
INTERACTIVE = str(EXAMPLES / "examples__flux__flux-interactive.yaml")


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_render(capsys, output):
    code, out, err = cli(
        capsys, "trainer", "render", "-f", LAMMPS, "--runtime", RUNTIME, "-o", output
    )
    assert code == 0, err
    objects = json.loads(out) if output == "json" else list(yaml.safe_load_all(out))
    if output == "json" and isinstance(objects, dict):
        objects = objects["items"]
    assert [o["kind"] for o in objects] == ["ConfigMap", "Secret", "JobSet"]
    for obj in objects:
        validate(obj)


def test_runtime_and_trainjob_in_one_file(capsys, tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text(Path(RUNTIME).read_text() + "\n---\n" + Path(LAMMPS).read_text())
    code, out, err = cli(capsys, "trainer", "render", "-f", both)
    assert code == 0, err
    assert "kind: JobSet" in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-f", LAMMPS], "uses ClusterTrainingRuntime 'flux-distributed', which is not in the files"),
        (
            ["-f", str(EXAMPLES / "examples__yaml__01-multi-node.yaml"), "--runtime",
             str(EXAMPLES / "manifests__base__runtimes__torch_distributed.yaml")],
            "has torch ML policy, not flux",
        ),
        (["-f", "/nonexistent.yaml", "--runtime", RUNTIME], "File '/nonexistent.yaml' does not exist"),
        (["-f", RUNTIME], "expected one TrainJob"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(capsys, args, words):
    code, out, err = cli(capsys, "trainer", "render", *args)
    assert code == 2 and out == ""
    assert err.startswith("fluxhop: ") and err.count("\n") == 1 and words in err


def test_run_streams_rank_0_and_exits_with_the_job_code(cli_cluster, kubeconfig, capsys):
    cli_cluster.runner = lambda pod, index: (["step 1\n"], 3) if index == 0 else ([], 0)
    code, out, err = cli(
        capsys, "trainer", "run", "-f", LAMMPS, "--runtime", RUNTIME, "--kubeconfig", kubeconfig
    )
    assert code == 3, err
    assert out == "step 1\n"
    assert cli_cluster.objects() == []  # the JobSet went, and with it the rest
    applied = [r.resource for r in cli_cluster.requests if r.verb == "APPLY"]
    assert applied == [
        "jobsets/lammps-flux",
        "configmaps/lammps-flux-flux-entrypoint",
        "secrets/lammps-flux-flux-curve",
    ]


def test_run_refuses_a_suspended_trainjob_before_creating_anything(
    cli_cluster, kubeconfig, capsys, tmp_path
):
    job = yaml.safe_load(Path(LAMMPS).read_text())
    job["spec"]["suspend"] = True
    path = tmp_path / "suspended.yaml"
    path.write_text(yaml.safe_dump(job))
    code, _, err = cli(
        capsys, "trainer", "run", "-f", path, "--runtime", RUNTIME, "--kubeconfig", kubeconfig
    )
    assert code == 2
    assert err == (
        "fluxhop: TrainJob lammps-flux is suspended (spec.suspend: true), and trainer run would "
        "wait for whoever resumes it; set it to false, or give the TrainJob to the Trainer "
        "controller\n"
    )
    assert cli_cluster.objects() == []


def test_rerun_keeps_the_secret(cli_cluster, kubeconfig, capsys):
    args = [
        "trainer",
        "run",
        "-f",
        LAMMPS,
        "--runtime",
        RUNTIME,
        "--kubeconfig",
        kubeconfig,
        "--keep",
    ]
    assert cli(capsys, *args)[0] == 0
    first = cli_cluster.get("Secret", "lammps-flux-flux-curve")
    assert cli(capsys, *args)[0] == 0
    again = cli_cluster.get("Secret", "lammps-flux-flux-curve")
    assert again["data"] == first["data"]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    jobset = cli_cluster.get("JobSet", "lammps-flux")
    assert jobset["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "fluxhop"
    code, out, _ = cli(capsys, "get", "lammps-flux", "--kubeconfig", kubeconfig)
    assert code == 0 and "lammps-flux" in out
    code, out, _ = cli(capsys, "logs", "lammps-flux", "--kubeconfig", kubeconfig)
    assert code == 0 and out == "hello from rank 0\n"
    assert cli(capsys, "delete", "lammps-flux", "--kubeconfig", kubeconfig)[0] == 0
    assert cli_cluster.objects() == []


def test_upstream_interactive_example_runs_its_sleep_command(cli_cluster, kubeconfig, capsys):
    # upstream's "interactive" example holds the cluster with `sleep infinity`
    code, _, err = cli(
        capsys,
        "trainer",
        "run",
        "-f",
        INTERACTIVE,
        "--runtime",
        RUNTIME,
        "--kubeconfig",
        kubeconfig,
    )
    assert code == 0, err
    (start,) = [r for r in cli_cluster.requests if r.verb == "APPLY" and "jobsets" in r.resource]
    assert start


def test_no_command_is_a_real_interactive_instance(cli_cluster, kubeconfig, capsys, tmp_path):
    job = yaml.safe_load(Path(INTERACTIVE).read_text())
    del job["spec"]["trainer"]["command"]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    code, _, err = cli(
        capsys, "trainer", "run", "-f", path, "--runtime", RUNTIME, "--kubeconfig", kubeconfig
    )
    assert code == 0, err
    assert "interactive MiniCluster lammps-flux-interactive is up" in err
    assert cli_cluster.get("JobSet", "lammps-flux-interactive") is not None  # kept
