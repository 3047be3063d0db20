"""`fluxhop render` and `fluxhop run --dry-run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fluxhop.cli import main
from fluxhop.render.pod import LEAD_STATE_VOLUME
from tests.conformance import REPO
from tests.schemas import validate

EXAMPLE = str(REPO / "examples" / "lammps.yaml")


def run_cli(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_render_example_yaml(capsys):
    code, out, err = run_cli(capsys, "render", "-f", EXAMPLE)
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    assert [o["kind"] for o in objects] == [
        "ConfigMap",
        "Secret",
        "Service",
        "NetworkPolicy",
        "Job",
    ]
    for obj in objects:
        validate(obj)
    assert "&id" not in out and "*id" not in out  # no YAML aliases


def test_render_targets_and_json(capsys):
    code, out, _ = run_cli(capsys, "render", "-f", EXAMPLE, "--target", "jobset", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "List"
    assert [o["kind"] for o in doc["items"]][-1] == "JobSet"
    code, out, _ = run_cli(
        capsys, "render", "-f", EXAMPLE, "--target", "minicluster", "--name", "other"
    )
    resource = yaml.safe_load(out)
    assert resource["metadata"]["name"] == "other"
    validate(resource)


def test_render_from_stdin(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(Path(EXAMPLE).read_text()))
    code, out, _ = run_cli(capsys, "render", "-f", "-")
    assert code == 0 and "kind: Job" in out


def test_render_errors_are_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec:\n  sise: 2\n  containers: [{image: x}]\n")
    code, out, err = run_cli(capsys, "render", "-f", str(bad))
    assert code == 2 and out == ""
    assert err == "fluxhop: spec.sise: unknown field; did you mean 'size'?\n"
    code, _, err = run_cli(capsys, "render", "-f", str(tmp_path / "missing.yaml"))
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err and "--filename" in err


def test_warnings_are_one_line_on_stderr(capsys, tmp_path):
    doc = tmp_path / "mc.yaml"
    doc.write_text(
        "metadata: {name: x}\nspec:\n  containers: [{image: x, command: hostname, batch: true}]\n"
    )
    code, out, err = run_cli(capsys, "render", "-f", str(doc))
    assert code == 0 and out
    assert err.startswith("fluxhop: warning: spec.containers[0].batch is ignored")
    assert err.count("\n") == 1


def test_run_dry_run_keeps_argv_and_flux_flags(capsys):
    code, out, err = run_cli(
        capsys,
        "run",
        "--dry-run",
        "-N",
        "4",
        "-n",
        "8",
        "--image",
        "ubuntu:noble",
        "-c",
        "2",
        "--name",
        "demo",
        "--namespace",
        "team",
        "--env",
        "A=1",
        "--workdir",
        "/w",
        "--",
        "sh",
        "-c",
        'echo "a  b" && exit 3',
    )
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    job = objects[-1]
    assert job["metadata"] == {**job["metadata"], "name": "demo", "namespace": "team"}
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["sh", "-c", 'echo "a  b" && exit 3']
    assert container["resources"] == {"requests": {"cpu": "4"}}
    assert {"name": "A", "value": "1"} in container["env"]
    assert container["workingDir"] == "/w"
    assert job["spec"]["parallelism"] == 4
    expected = "flux_run_args=(-N 4 -n 8 --exclusive -o cpu-affinity=off -c 2)"
    assert expected in objects[0]["data"]["entrypoint.sh"]  # -c makes a CPU request


def test_run_stops_option_parsing_at_the_command(capsys):
    # flags after the command belong to the command, as with flux run
    code, out, _ = run_cli(
        capsys,
        "run",
        "--dry-run",
        "--image",
        "x",
        "--name",
        "demo",
        "python",
        "-n",
        "3",
        "--lr",
        "0.1",
    )
    assert code == 0
    job = list(yaml.safe_load_all(out))[-1]
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "python",
        "-n",
        "3",
        "--lr",
        "0.1",
    ]
    assert job["spec"]["parallelism"] == 1


def test_run_dry_run_default_name_is_random(capsys):
    code, out, _ = run_cli(capsys, "run", "--dry-run", "--image", "x", "hostname")
    assert code == 0
    name = list(yaml.safe_load_all(out))[-1]["metadata"]["name"]
    adjective, noun = name.split("-")
    assert adjective and noun


def test_run_file_and_flags_conflict(capsys):
    code, _, err = run_cli(capsys, "run", "--dry-run", "-f", EXAMPLE, "-N", "2")
    assert code == 2 and "-f takes the whole job from the file" in err


def test_run_requires_an_image(capsys):
    code, _, err = run_cli(capsys, "run", "--dry-run", "hostname")
    assert code == 2 and "--image is required" in err


def test_health_checks_from_flags(capsys):
    code, out, err = run_cli(capsys, "run", "--dry-run", "--image", "x", "-N", "2",
                             "--health-check", "scratch=fluxhop_disk_free /tmp 100",
                             "--health-interval", "5", "--", "hostname")  # fmt: skip
    assert code == 0, err
    config = next(o for o in yaml.safe_load_all(out) if o["kind"] == "ConfigMap")
    assert config["data"]["health.scratch.sh"] == "fluxhop_disk_free /tmp 100\n"
    assert "check_intervals=(5)" in config["data"]["health.sh"]


def test_lead_state_from_flags(capsys):
    """--lead-state sets spec.leadState: a claim of a class and size, or an emptyDir."""
    code, out, err = run_cli(capsys, "run", "--dry-run", "--image", "x", "-N", "2", "--name",
                             "keep", "--lead-state", "class=fast,size=5Gi")  # fmt: skip
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    claim = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "keep-lead-state"
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    for obj in objects:
        validate(obj)
    code, out, err = run_cli(capsys, "run", "--dry-run", "--image", "x", "-N", "2",
                             "--lead-state", "emptyDir")  # fmt: skip
    assert code == 0, err
    job = next(o for o in yaml.safe_load_all(out) if o["kind"] == "Job")
    assert {"name": LEAD_STATE_VOLUME, "emptyDir": {}} in job["spec"]["template"]["spec"]["volumes"]
    assert not [o for o in yaml.safe_load_all(out) if o["kind"] == "PersistentVolumeClaim"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--lead-state", "size=0"], "fluxhop: --lead-state size: is 0; give the claim's size"),
        (["--lead-state", "claim=Bad_Name"], "fluxhop: --lead-state claim: 'Bad_Name' must be"),
        (["--lead-state", "checkpoint=0"], "fluxhop: --lead-state checkpoint: "),
        (["--lead-state", "pvc"], "fluxhop: --lead-state 'pvc': pvc is not one of"),
        (["--lead-state", "emptyDir", "--", "hostname"],
         "fluxhop: --lead-state keeps an interactive MiniCluster's queue, and a command makes a "
         "batch one"),
    ],
)  # fmt: skip
def test_lead_state_flag_errors_are_one_line_naming_it(capsys, args, said):
    code, out, err = run_cli(capsys, "run", "--dry-run", "--image", "x", "-N", "2", *args)
    assert code == 2 and not out
    assert err.startswith(said) and err.count("\n") == 1, err
