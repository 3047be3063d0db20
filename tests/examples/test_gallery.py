"""Every file in examples/ (a new one is picked up without editing this
test): its header says what it shows and gives a command that runs it; every
fluxhop command there parses; every command that renders it (on each target
the header names, through the file's own door) makes objects a real API
server would accept, without a warning; and a jobspec example means the same
MiniCluster as the ``fluxhop hop`` command beside it."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest

from fluxhop.render import render
from fluxhop.render.output import dump_json
from tests.examples.gallery import EXAMPLES, Example, jobspec_minicluster, read
from tests.schemas import SchemaError, validate
from tests.test_docs import _parse

JOBSPECS = [path for path in EXAMPLES if read(path).is_jobspec]


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.name)
def example(request: pytest.FixtureRequest) -> Example:
    return read(request.param)


def check_header(example: Example) -> None:
    """What it shows in prose first, then at least one command naming the file."""
    assert example.prose, f"{example.relative}: no header comment saying what it shows"
    assert example.own(), f"{example.relative}: no command in the header names {example.relative}"


def check_renderings(example: Example) -> int:
    """Render through every command of the header that renders; return how
    many objects were checked."""
    renderings = example.renderings()
    assert renderings, f"{example.relative}: no header command renders it"
    checked = 0
    for rendering in renderings:
        assert rendering.objects, f"{example.relative}: {rendering.how} made nothing"
        assert not rendering.warnings, f"{example.relative}: {rendering.how}: {rendering.warnings}"
        for obj in rendering.objects:
            try:
                validate(obj)
            except SchemaError as err:
                raise AssertionError(f"{example.relative}: {rendering.how}: {err}") from None
            checked += 1
    return checked


def test_the_header_says_what_it_shows_and_how_to_run_it(example: Example):
    check_header(example)


def test_every_fluxhop_command_in_the_header_parses(example: Example):
    for argv in example.fluxhop():
        try:
            _parse(argv)
        except click.ClickException as err:
            pytest.fail(f"{example.relative}: fluxhop {shlex.join(argv)}: {err.format_message()}")


def test_every_named_door_and_target_renders_admissible_objects(example: Example):
    assert check_renderings(example) > 0


@pytest.mark.parametrize("path", JOBSPECS, ids=lambda p: p.name)
def test_the_jobspec_means_what_the_hop_command_beside_it_does(path: Path):
    example = read(path)
    hops = [r for r in example.renderings() if r.how.startswith("hop")]
    assert hops, f"{example.relative}: no `fluxhop hop ... --dry-run` beside the jobspec"
    (argv,) = [a for a in example.fluxhop() if a[0] == "hop"]
    rabbits = argv[argv.index("--rabbits") + 1].split(",")
    spec = jobspec_minicluster(example, rabbits, argv[argv.index("--name") + 1])
    ours = [o for o in render(spec) if o["kind"] != "Secret"]  # the CURVE key is random
    theirs = [o for o in hops[0].objects if o["kind"] != "Secret"]
    assert dump_json(ours) == dump_json(theirs)
    for obj in render(spec):
        validate(obj)


def test_the_checks_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("tests.examples.gallery.REPO", tmp_path)
    (tmp_path / "examples").mkdir()
    silent = tmp_path / "examples" / "silent.yaml"
    silent.write_text("#   fluxhop render -f examples/silent.yaml\nkind: MiniCluster\n")
    with pytest.raises(AssertionError, match="no header comment"):
        check_header(read(silent))
    elsewhere = tmp_path / "examples" / "elsewhere.yaml"
    elsewhere.write_text("# Shows a thing.\n#\n#   fluxhop render -f examples/other.yaml\n")
    with pytest.raises(AssertionError, match="no command in the header names"):
        check_header(read(elsewhere))
    typo = tmp_path / "examples" / "typo.yaml"
    typo.write_text(
        "# A typo.\n#\n#   fluxhop render -f examples/typo.yaml\n"
        + "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: typo\n"
        + "spec:\n  sise: 2\n  containers:\n    - image: ubuntu:noble\n"
    )
    with pytest.raises(AssertionError, match=r"exited 2: .*sise"):
        check_renderings(read(typo))
    warned = tmp_path / "examples" / "warned.yaml"
    warned.write_text(
        "# A warning.\n#\n#   fluxhop render -f examples/warned.yaml --target minicluster\n"
        + "apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\nmetadata:\n  name: w\n"
        + "spec:\n  pod:\n    podsPerNode: 1\n  containers:\n    - image: ubuntu:noble\n"
    )
    with pytest.raises(AssertionError, match="podsPerNode"):
        check_renderings(read(warned))
