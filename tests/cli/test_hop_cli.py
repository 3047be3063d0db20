"""`fluxhop hop` / `flux hop`: rabbit MiniClusters from flags."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from fluxhop.cli import flux_hop, main
from fluxhop.spec.names import ADJECTIVES, NOUNS
from tests.cluster.fakeapi import NNF_KINDS
from tests.schemas import validate


def cli(capsys, *args, entry=main):
    code = entry([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def objects_of(out):
    return [o for o in yaml.safe_load_all(out) if o]


def test_dry_run_renders_valid_objects_on_the_chosen_rabbits(capsys):
    code, out, err = cli(
        capsys,
        "hop", "--rabbits", "rabbit-p3,rabbit-p1,rabbit-p2", "--nodes", "2", "--image", "lammps:cxi",
        "--command", "lmp -in in.reaxc", "--no-add-flux", "--succeed", "--tasks", "8",
        "--env", "OMP_NUM_THREADS=4", "-e", "A=b=c", "--name", "demo", "--dry-run",
    )  # fmt: skip
    assert code == 0, err
    objects = objects_of(out)
    for obj in objects:
        validate(obj)
    job = objects[-1]
    assert job["kind"] == "Job" and job["metadata"]["name"] == "demo"
    assert job["metadata"]["labels"]["always-succeed"] == "1"
    template = job["spec"]["template"]["spec"]
    assert "initContainers" not in template  # --no-add-flux (upstream lost it)
    values = template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert values["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "rabbit-p1",
        "rabbit-p2",
    ]
    assert template["nodeSelector"] == {"cray.nnf.node": "true"}
    context = template["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (os.getuid(), os.getgid())
    env = {e["name"]: e.get("value") for e in template["containers"][0]["env"]}
    assert env["OMP_NUM_THREADS"] == "4" and env["A"] == "b=c"
    assert job["spec"]["parallelism"] == 2
    assert template["containers"][0]["args"] == ["lmp", "-in", "in.reaxc"]


def test_default_is_an_interactive_minicluster_with_a_random_name(capsys):
    code, out, err = cli(
        capsys, "hop", "--rabbits", "r1,r2", "--dry-run", "--target", "minicluster"
    )
    assert code == 0, err
    (cr,) = objects_of(out)
    validate(cr)
    adjective, noun = cr["metadata"]["name"].split("-")
    assert adjective in ADJECTIVES and noun in NOUNS
    assert cr["spec"]["interactive"] is True and cr["spec"]["size"] == 2
    assert cr["spec"]["flux"]["container"]["disable"] is True  # the default image has Flux


def test_flux_hop_entry_point_is_fluxhop_hop(capsys):
    code, out, err = cli(capsys, "--rabbits", "r1", "--name", "x", "--dry-run", entry=flux_hop)
    assert code == 0, err
    assert objects_of(out)[-1]["metadata"]["name"] == "x"


@pytest.mark.parametrize(
    ("args", "words", "status"),
    [
        ([], "Missing option '--rabbits'", 2),  # upstream exited 0 here
        (["--rabbits", ","], "--rabbits names no rabbit", 2),
        (["--rabbits", "a", "--env", "BAD"], "--env 'BAD': write it as KEY=VALUE", 2),
        (["--rabbits", "a", "--nodes", "0"], "--nodes 0: must be 1 or more", 2),
        (["--rabbits", "a", "--name", "Bad_Name"], "'--name': 'Bad_Name'", 2),
        (["--rabbits", "a", "--command", "lmp 'x"], "--command", 2),
    ],
)
def test_bad_flags_are_one_line_errors(capsys, args, words, status):
    code, out, err = cli(capsys, "hop", *args, "--dry-run")
    assert code == status and out == ""
    assert err.startswith("fluxhop: ") and err.count("\n") == 1
    assert words in err


def test_hop_creates_on_the_cluster(cli_cluster, kubeconfig, capsys):
    code, out, err = cli(
        capsys, "hop", "--kubeconfig", kubeconfig, "--rabbits", "r1,r2", "--name", "hoppy",
        "--command", "hostname",
    )  # fmt: skip
    assert code == 0, err
    assert cli_cluster.get("Job", "hoppy")["spec"]["parallelism"] == 2
    assert "rabbits: r1,r2" in out and "command: hostname" in out
    assert "fluxhop delete hoppy" in err


def test_flux_hop_script_is_installed():
    script = os.path.join(sys.exec_prefix, "bin", "flux-hop")
    done = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--rabbits" in done.stdout


@pytest.fixture
def rabbit_cluster(cli_cluster):
    """The fake API server with DWS's and NNF's kinds, a Workflow of this
    user's with a GFS2 file system NNF has mounted (its servers NnfAccess)."""
    cli_cluster.crds = cli_cluster.crds | NNF_KINDS
    spec = {"dwDirectives": ["#DW jobdw type=gfs2 capacity=10GiB name=scratch"], "desiredState": "PreRun",
            "userID": os.getuid(), "groupID": os.getgid(), "wlmID": "flux", "jobID": 1}  # fmt: skip
    cli_cluster.seed("Workflow", {"metadata": {"name": "fluxjob-7"}, "spec": spec})
    access = {"mountPath": "/mnt/nnf/u-0", "target": "all"}
    cli_cluster.seed("NnfAccess", {"metadata": {"name": "fluxjob-7-0-servers"}, "spec": access})
    return cli_cluster


def test_hop_with_a_workflow_mounts_what_nnf_mounted(rabbit_cluster, kubeconfig, capsys):
    code, out, err = cli(capsys, "hop", "--kubeconfig", kubeconfig, "--rabbits", "r1", "--workflow",
                         "fluxjob-7", "--dry-run")  # fmt: skip
    assert code == 0, err
    job = next(o for o in objects_of(out) if o["kind"] == "Job")
    template = job["spec"]["template"]["spec"]
    assert {
        "name": "rabbit-0",
        "hostPath": {"path": "/mnt/nnf/u-0", "type": "Directory"},
    } in template["volumes"]
    env = {e["name"]: e.get("value") for e in template["containers"][0]["env"]}
    assert (env["DW_JOB_scratch"], env["DW_WORKFLOW_NAME"]) == ("/mnt/nnf/u-0", "fluxjob-7")


def test_hop_with_a_missing_workflow_is_one_line(rabbit_cluster, kubeconfig, capsys):
    code, _, err = cli(
        capsys, "hop", "--kubeconfig", kubeconfig, "--rabbits", "r1", "--workflow", "nope"
    )
    assert code != 0 and err.count("\n") == 1
    assert "--workflow nope: no such Workflow in namespace default" in err
