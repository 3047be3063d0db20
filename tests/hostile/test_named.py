"""Errors name what the user typed: a flag names the flag (`--cxi-resource`,
not `spec.containers[0].resources.limits`), a file names the field path, a
jobspec names its `rabbit.mpi.*` attribute, a Workflow its `metadata.name` -
in one short line, exit 2, and nothing sent to the API server. A huge value
is quoted cut short, and image references are checked as the container
runtimes parse them, the Flux Operator's services included."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from fluxhop import Client
from fluxhop.cli import main
from fluxhop.errors import FluxhopError
from fluxhop.rabbit.hooks import on_pre_run
from fluxhop.rabbit.policy import Owner
from tests.hostile.lines import one_line, one_line_after_warnings
from tests.rabbit.conftest import RABBITS, rabbit_job, workflow_object

EXAMPLE = Path(__file__).parents[2] / "examples" / "lammps.yaml"
BIG = "a" * 100_000  # 100 KB
SHORT = 500  # characters an error line may take, whatever it quotes
SHA256 = "0123456789abcdef" * 4
OWNER = Owner(uid=1001, gid=2001, user="alice", groups=("hpc",))


def refused(capsys, fake, *args: str) -> str:
    """The CLI's one line, exit 2, and no request sent."""
    code, err = one_line(capsys, *args)
    assert code == 2, err
    assert fake.requests == [], err
    return err


def main_ok(capsys, *args: str) -> bool:
    return main(list(args)) == 0


@pytest.fixture
def client(fake, kubeconfig):
    with Client(kubeconfig=str(kubeconfig), transport=fake.transport()) as api:
        yield api


# --- flags --------------------------------------------------------------------

# run and create: (flags, the words the line must hold: the flag as typed)
JOB_FLAGS: list[tuple[list[str], str]] = [
    (["-N", "0"], "-N/--nodes"), (["-N", "200000"], "-N/--nodes"), (["-N", "x"], "'-N'"),
    (["-n", "0"], "-n/--ntasks"), (["-N", "4", "-n", "2"], "-n 2"),
    (["-c", "0"], "-c/--cores-per-task"), (["-c", "100000"], "-c/--cores-per-task"),
    (["-g", "-1"], "-g/--gpus-per-task"), (["-g", "1000"], "-g/--gpus-per-task"),
    (["--image", "Bad:"], "--image"), (["--image", "a b"], "--image"),
    (["--image", "ubuntu@sha256:abc"], "--image"), (["--image", "ubuntu@md5:" + "0" * 32], "--image"),
    (["--image", "ubuntu@sha512:" + SHA256], "--image"), (["--image", "ubuntu@sha256:" + SHA256.upper()], "--image"),
    (["--workdir", "rel"], "--workdir"), (["--env", "noequals"], "--env"), (["--env", "=v"], "--env"),
    (["--env", "é=v"], "--env"), (["--env", "A\tB=v"], "--env"),
    (["--name", "Bad_Name"], "'--name'"), (["--name", "a" * 62], "--name"),
    (["-N", "100", "--name", "a" * 61], "--name"), (["--max-size", "0"], "--max-size"),
    (["-N", "3", "--max-size", "2"], "--max-size"), (["--gpu-resource", "bad name", "-g", "1"], "--gpu-resource"),
    (["-o", "=x"], "-o/--setopt"), (["-S", "=x"], "-S/--setattr"), (["-t", "abc"], "-t/--time-limit"),
    (["-t", "1e400"], "-t/--time-limit"), (["--flux-args", "'x"], "--flux-args"),
    (["--flux-args", "-t abc"], "--flux-args"), (["--flux-args", "-c 100000"], "--flux-args"),
    (["--queue", "Team A"], "--queue"), (["--priority-class", "High!"], "--priority-class"),
    (["--topology", "a b"], "--topology"), (["--node-selector", "nokey"], "--node-selector"),
    (["--toleration", "gpu"], "--toleration"), (["--memory", "lots"], "--memory"),
    (["--cpu", "0"], "--cpu"), (["--pods-per-node", "0"], "--pods-per-node"),
    (["--service-account", "A_B"], "--service-account"), (["--image-pull-secret", "x/y"], "--image-pull-secret"),
    (["--pull-policy", "Sometimes"], "'--pull-policy'"),
    (["--security", "baseline"], "'--security'"), (["--target", "deployment"], "'--target'"),
    (["--cluster-domain", "bad domain"], "'--cluster-domain'"), (["--namespace", "Bad NS"], "'--namespace'"),
    (["--request-timeout", "0"], "'--request-timeout'"), (["--timeout", "soon"], "'--timeout'"),
]  # fmt: skip


@pytest.mark.parametrize("verb", ["run", "create"])
@pytest.mark.parametrize(("flags", "words"), JOB_FLAGS, ids=[" ".join(f) for f, _ in JOB_FLAGS])
def test_a_bad_job_flag_names_the_flag(cli_cluster, kubeconfig, capsys, verb, flags, words):
    command = ["--", "true"] if verb == "run" else []
    args = [verb, "--kubeconfig", str(kubeconfig), "--image", "ubuntu:noble", *flags, *command]
    err = refused(capsys, cli_cluster, *args)
    assert words in err and "spec." not in err, err


@pytest.mark.parametrize("verb", ["run", "create"])
def test_a_command_that_starts_with_an_option_names_the_command(
    cli_cluster, kubeconfig, capsys, verb
):
    args = [verb, "--kubeconfig", str(kubeconfig), "--image", "ubuntu", "--", "-x", "foo"]
    err = refused(capsys, cli_cluster, *args)
    assert "COMMAND: must start with a program name, not the option '-x'" in err, err


@pytest.mark.parametrize("verb", ["run", "create", "render"])
def test_a_name_too_long_for_the_files_minicluster_names_the_flag(
    cli_cluster, kubeconfig, capsys, verb
):
    """--name over a file: the pods' host names (<name>-3) pass 63."""
    where = [] if verb == "render" else ["--kubeconfig", str(kubeconfig)]
    args = [verb, *where, "-f", str(EXAMPLE), "--name", "a" * 62]
    err = refused(capsys, cli_cluster, *args)
    assert err.startswith("fluxhop: --name 'aaaa") and "is too long" in err, err
    assert "internal error" not in err and "metadata.name" not in err, err


# hop: the flags are rabbit.mpi.* attributes; errors name the flags, never the
# attributes or the spec paths behind them
HOP_FLAGS: list[tuple[list[str], str]] = [
    (["--image", "Bad:"], "--image"), (["--image", "u@sha512:" + SHA256], "--image"),
    (["--command", "'x"], "--command"), (["--command", "-x foo"], "--command"), (["--command", ""], "--command"),
    (["--workdir", "rel"], "--workdir"), (["--workdir", ""], "--workdir"),
    (["--tasks", "0"], "--tasks 0"), (["--tasks", "x"], "'--tasks'"), (["--nodes", "0"], "--nodes 0"),
    (["-e", "é=v"], "-e/--env é"), (["-e", "A\tB=v"], "-e/--env"), (["-e", "noequals"], "--env"),
    (["--pull-policy", "Sometimes"], "'--pull-policy'"), (["--pull-secret", "Bad_Secret"], "--pull-secret"),
    (["--name", "Bad"], "'--name'"), (["--name", "a" * 62], "--name"),
    (["--cxi-resource", "Bad_Res"], "--cxi-resource"), (["--cxi-resource", ""], "--cxi-resource"),
    (["--cxi-resource", "a/b/c"], "--cxi-resource"), (["--target", "x"], "'--target'"),
    (["--cluster-domain", "a..b"], "'--cluster-domain'"), (["--namespace", "Bad NS"], "'--namespace'"),
    (["--output", "xml"], "'--output'"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "words"), HOP_FLAGS, ids=[" ".join(f) for f, _ in HOP_FLAGS])
def test_a_bad_hop_flag_names_the_flag(cli_cluster, kubeconfig, capsys, flags, words):
    args = ["hop", "--kubeconfig", str(kubeconfig), "--rabbits", "r1", *flags]
    err = refused(capsys, cli_cluster, *args)
    assert words in err, err
    assert "spec." not in err and "rabbit.mpi" not in err, err


@pytest.mark.parametrize(
    ("rabbits", "words"),
    [
        ("Bad_Rabbit", "--rabbits: 'Bad_Rabbit' is not a node name"),
        (",", "--rabbits names no rabbit"),
    ],
)
def test_a_bad_rabbit_list_names_the_flag(cli_cluster, kubeconfig, capsys, rabbits, words):
    err = refused(capsys, cli_cluster, "hop", "--kubeconfig", str(kubeconfig), "--rabbits", rabbits)
    assert words in err, err


def test_a_hop_warning_names_the_flag(capsys):
    assert main_ok(capsys, "hop", "--dry-run", "--rabbits", "r1", "--nodes", "3")
    assert "fluxhop: warning: --nodes 3 but only 1 rabbit(s)" in capsys.readouterr().err


# submit: every job flag is checked before anything connects
SUBMIT_FLAGS: list[tuple[list[str], str]] = [
    (["-N", "0"], "-N must be 1 or more"), (["-n", "0"], "-n must be 1 or more"),
    (["-c", "0"], "-c must be 1 or more"), (["-g", "-1"], "-g must be 0 or more"),
    (["--cc", "abc"], "--cc 'abc'"), (["--cc", "5-1"], "--cc '5-1'"), (["-t", "abc"], "-t/--time-limit"),
    (["--env", "noequals"], "--env"), (["-o", "=x"], "-o/--setopt"), (["-S", "=x"], "-S/--setattr"),
    (["--flux-args", "'x"], "--flux-args"), (["-N", "x"], "'-N'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "words"), SUBMIT_FLAGS, ids=[" ".join(f) for f, _ in SUBMIT_FLAGS]
)
def test_a_bad_submit_flag_is_refused_before_connecting(
    cli_cluster, kubeconfig, capsys, flags, words
):
    args = ["submit", "--kubeconfig", str(kubeconfig), "work", *flags, "--", "true"]
    err = refused(capsys, cli_cluster, *args)
    assert words in err, err


@pytest.mark.parametrize(
    ("flags", "words"), SUBMIT_FLAGS[:5], ids=[" ".join(f) for f, _ in SUBMIT_FLAGS[:5]]
)
def test_a_bad_submit_flag_beats_a_missing_kubeconfig(tmp_path, capsys, monkeypatch, flags, words):
    """With no Kubernetes configuration the flag is still what the line names."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, err = one_line(capsys, "submit", "work", *flags, "--", "true")
    assert code == 2 and words in err, err


# --- files: the field path -------------------------------------------------------


def lammps() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def lead(doc: dict) -> dict:
    return doc["spec"]["containers"][0]


FILES: list[tuple[str, object, str]] = [
    ("digest-short", lambda d: lead(d).update(image="ubuntu@sha256:abc"), "spec.containers[0].image: 'ubuntu@sha256:abc' has a sha256 digest of 3 hex digits"),
    ("digest-33", lambda d: lead(d).update(image="ubuntu@sha256:" + "a" * 33), "sha256 has exactly 64"),
    ("digest-sha512-64", lambda d: lead(d).update(image="ubuntu@sha512:" + SHA256), "sha512 has exactly 128"),
    ("digest-upper", lambda d: lead(d).update(image="ubuntu@sha256:" + SHA256.upper()), "lower case"),
    ("digest-md5", lambda d: lead(d).update(image="ubuntu@md5:" + "0" * 32), "sha256, sha384 and sha512 only"),
    ("repository-256", lambda d: lead(d).update(image="a" * 256), "repository name of 256 characters"),
    ("view-digest", lambda d: d["spec"]["flux"]["container"].update(image="flux@sha384:" + SHA256), "spec.flux.container.image"),
    ("sidecar-digest", lambda d: d["spec"]["containers"].append({"name": "side", "image": "x@sha256:1"}), "spec.containers[1].image"),
    ("name-number", lambda d: d["metadata"].update(name=123), "metadata.name: must be a string, not the number 123; quote it"),
    ("name-bool", lambda d: d["metadata"].update(name=True), "metadata.name: must be a string, not true; quote it"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "mutate", "words"), FILES, ids=[f[0] for f in FILES])
def test_a_bad_file_names_the_field(cli_cluster, kubeconfig, capsys, tmp_path, case, mutate, words):
    doc = lammps()
    mutate(doc)  # type: ignore[operator]
    path = tmp_path / "mc.yaml"
    path.write_text(yaml.safe_dump(doc))
    err = refused(capsys, cli_cluster, "create", "--kubeconfig", str(kubeconfig), "-f", str(path))
    assert words in err, err


# what Kubernetes' YAML (kubectl) reads as a number or a boolean, unquoted
@pytest.mark.parametrize(
    ("written", "read"),
    [("1e3", "the number 1000.0"), ("1E3", "the number 1000.0"), ("08", "the number 8.0"),
     ("0o17", "the number 15"), ("0X1F", "the number 31"), ("1e-3", "the number 0.001"),
     ("y", "true"), ("n", "false")],
)  # fmt: skip
def test_a_name_kubernetes_reads_as_no_string_is_refused(
    cli_cluster, kubeconfig, capsys, tmp_path, written, read
):
    path = tmp_path / "mc.yaml"
    path.write_text(EXAMPLE.read_text().replace("\n  name: lammps\n", f"\n  name: {written}\n"))
    err = refused(capsys, cli_cluster, "create", "--kubeconfig", str(kubeconfig), "-f", str(path))
    assert f"metadata.name: must be a string, not {read}; quote it in the YAML" in err, err


@pytest.mark.parametrize("written", ["'1e3'", '"08"', "2026-01-01", "a1e3"])
def test_a_quoted_or_date_like_name_is_a_name(capsys, tmp_path, written):
    """Quoted, it is text; a date stays text in Kubernetes' YAML too."""
    path = tmp_path / "mc.yaml"
    path.write_text(EXAMPLE.read_text().replace("\n  name: lammps\n", f"\n  name: {written}\n"))
    assert main_ok(capsys, "render", "-f", str(path)), capsys.readouterr().err
    assert f"name: {written.strip(chr(39) + chr(34))}-" in capsys.readouterr().out


def test_a_plain_1e3_elsewhere_keeps_its_text(capsys, tmp_path):
    """Only the object's name and namespace are read the go-yaml way."""
    path = tmp_path / "mc.yaml"
    path.write_text(
        "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata: {name: demo}\n"
        "spec:\n  containers:\n  - image: ubuntu\n    environment: {N: 1e3}\n"
    )
    assert main_ok(capsys, "render", "-f", str(path)), capsys.readouterr().err
    assert 'value: "1e3"' in capsys.readouterr().out  # quoted: kubectl reads it back as text


# --- services passed on to the Flux Operator -------------------------------------------

SERVICES: list[tuple[str, object, str]] = [
    ("image-space", [{"name": "svc", "image": "Bad Image:"}], "spec.services[0].image: 'Bad Image:'"),
    ("image-digest", [{"name": "svc", "image": "registry@sha256:abc"}], "spec.services[0].image"),
    ("image-number", [{"name": "svc", "image": 5}], "spec.services[0].image must be a string"),
    ("second", [{"name": "a", "image": "ok"}, {"name": "b", "image": "UP"}], "spec.services[1].image"),
    ("command-ints", [{"name": "svc", "image": "ok", "command": [1]}], "spec.services[0].command"),
    ("not-a-list", 5, "spec.services must be a list"),
    ("entry-scalar", ["x"], "spec.services[0] must be a mapping"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "services", "words"), SERVICES, ids=[s[0] for s in SERVICES])
def test_services_for_the_operator_are_checked(
    cli_cluster, kubeconfig, capsys, tmp_path, case, services, words
):
    doc = lammps()
    doc["spec"]["services"] = services
    path = tmp_path / "mc.yaml"
    path.write_text(yaml.safe_dump(doc))
    args = ["create", "--kubeconfig", str(kubeconfig), "-f", str(path), "--target", "minicluster"]
    code, err = one_line_after_warnings(capsys, *args)
    assert code == 2 and words in err, err
    assert cli_cluster.requests == []


def test_good_services_are_passed_on(capsys, tmp_path):
    doc = lammps()
    doc["spec"]["services"] = [{"name": "registry", "image": f"registry@sha256:{SHA256}"}]
    path = tmp_path / "mc.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main_ok(capsys, "render", "-f", str(path), "--target", "minicluster")
    assert f"registry@sha256:{SHA256}" in capsys.readouterr().out


# --- jobspecs and Workflows: the attribute, the Workflow's metadata ----------------------

JOBSPECS: list[tuple[dict, str]] = [
    ({"image": "Bad:"}, "rabbit.mpi.image: 'Bad:'"), ({"image": "u@sha256:abc"}, "rabbit.mpi.image"),
    ({"workdir": "rel"}, "rabbit.mpi.workdir: 'rel'"), ({"command": "-x foo"}, "rabbit.mpi.command: must start"),
    ({"env": {"é": "v"}}, "rabbit.mpi.env.é: must be an environment variable name"),
    ({"pull_secret": "Bad_Secret"}, "rabbit.mpi.pull_secret: 'Bad_Secret'"),
    ({"tasks": 0}, "rabbit.mpi.tasks=0"), ({"nodes": "two"}, 'rabbit.mpi.nodes="two"'),
]  # fmt: skip


@pytest.mark.parametrize(("mpi", "words"), JOBSPECS, ids=[str(m) for m, _ in JOBSPECS])
def test_a_bad_jobspec_attribute_names_the_attribute(fake, client, mpi, words):
    job = rabbit_job({"image": "lammps", **mpi})
    with pytest.raises(FluxhopError) as info:
        on_pre_run(job, workflow_object(), RABBITS, OWNER, client)
    message = str(info.value)
    assert words in message and "spec." not in message, message
    assert fake.requests == []


@pytest.mark.parametrize(
    ("name", "words"),
    [("Fluxjob_1", "the Workflow's metadata.name: 'Fluxjob_1' must be lower-case"),
     ("a" * 70, "the Workflow's metadata.name: 'aaaa"),
     ("a" * 62, "the Workflow's metadata.name 'aaaa"),
     (True, "the Workflow's metadata.name must be a string, not True")],
    ids=["underscore", "70", "host-name", "bool"],
)  # fmt: skip
def test_a_bad_workflow_name_names_the_workflow(fake, client, name, words):
    workflow = copy.deepcopy(workflow_object())
    workflow["metadata"]["name"] = name
    with pytest.raises(FluxhopError) as info:
        on_pre_run(rabbit_job({"image": "lammps"}), workflow, RABBITS, OWNER, client)
    message = str(info.value)
    assert words in message and "spec.containers" not in message, message
    assert "\n" not in message and len(message) < SHORT
    assert fake.requests == []


# --- long values: one short line ------------------------------------------------------

LONG: list[tuple[str, list[str]]] = [
    ("run-image", ["run", "--image", BIG, "--", "true"]),
    ("run-name", ["run", "--image", "ubuntu", "--name", BIG, "--", "true"]),
    ("run-env-item", ["run", "--image", "ubuntu", "--env", BIG, "--", "true"]),
    ("run-env-name", ["run", "--image", "ubuntu", "--env", f"é{BIG}=v", "--", "true"]),
    ("run-workdir", ["run", "--image", "ubuntu", "--workdir", BIG, "--", "true"]),
    ("run-node-selector", ["run", "--image", "ubuntu", "--node-selector", BIG, "--", "true"]),
    ("run-time", ["run", "--image", "ubuntu", "-t", BIG, "--", "true"]),
    ("run-command", ["run", "--image", "ubuntu", "--", f"-{BIG}"]),
    ("create-gpu-resource", ["create", "--image", "ubuntu", "-g", "1", "--gpu-resource", BIG]),
    ("create-flux-args", ["create", "--image", "ubuntu", "--flux-args", f"'{BIG}"]),
    ("hop-image", ["hop", "--rabbits", "r1", "--image", BIG]),
    ("hop-name", ["hop", "--rabbits", "r1", "--name", BIG]),
    ("hop-env", ["hop", "--rabbits", "r1", "-e", BIG]),
    ("hop-env-name", ["hop", "--rabbits", "r1", "-e", f"é{BIG}=v"]),
    ("hop-rabbits", ["hop", "--rabbits", BIG]),
    ("hop-command", ["hop", "--rabbits", "r1", "--command", f"'{BIG}"]),
    ("submit-cc", ["submit", "work", "--cc", BIG, "--", "true"]),
    ("submit-env", ["submit", "work", "--env", BIG, "--", "true"]),
]  # fmt: skip


@pytest.mark.parametrize(("case", "args"), LONG, ids=[c for c, _ in LONG])
def test_a_huge_flag_value_is_quoted_short(cli_cluster, kubeconfig, capsys, case, args):
    verb, *rest = args
    err = refused(capsys, cli_cluster, verb, "--kubeconfig", str(kubeconfig), *rest)
    assert len(err) < SHORT, err[:SHORT]


LONG_FILES: list[tuple[str, object]] = [
    ("image", lambda d: lead(d).update(image=BIG)),
    ("name", lambda d: d["metadata"].update(name=BIG)),
    ("env-value-list", lambda d: lead(d).update(environment={"A": [BIG]})),
    ("env-name", lambda d: lead(d).update(environment={f"é{BIG}": "v"})),
    ("label-value", lambda d: d["metadata"].update(labels={"a": BIG})),
    ("unknown-key", lambda d: lead(d).update({BIG: 1})),
    ("workdir", lambda d: lead(d).update(workingDir=BIG)),
    ("view-image", lambda d: d["spec"]["flux"]["container"].update(image=BIG)),
]  # fmt: skip


@pytest.mark.parametrize(("case", "mutate"), LONG_FILES, ids=[c for c, _ in LONG_FILES])
def test_a_huge_value_in_a_file_is_quoted_short(
    cli_cluster, kubeconfig, capsys, tmp_path, case, mutate
):
    doc = lammps()
    mutate(doc)  # type: ignore[operator]
    path = tmp_path / "mc.yaml"
    path.write_text(yaml.safe_dump(doc, width=1 << 30))
    err = refused(capsys, cli_cluster, "create", "--kubeconfig", str(kubeconfig), "-f", str(path))
    assert len(err) < SHORT, err[:SHORT]


def test_a_huge_jobspec_value_is_quoted_short(fake, client):
    for mpi in ({"image": BIG}, {"env": {f"é{BIG}": "v"}}, {"workdir": BIG}, {"rabbits": BIG}):
        with pytest.raises(FluxhopError) as info:
            on_pre_run(rabbit_job(mpi), workflow_object(), RABBITS, OWNER, client)
        assert len(str(info.value)) < SHORT, str(info.value)[:SHORT]
    assert fake.requests == []
