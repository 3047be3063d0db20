"""The documentation: the site builds with ``mkdocs build --strict``, and the
generated references leave nothing out - every verb and option has its help,
every field of the Flux Operator's CRD is implemented, warned about or
refused in the MiniCluster reference, every field fluxhop adds is marked as
an extension, every public Client method has a docstring - and the README is
the short entry it should be."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from fluxhop import Client
from fluxhop.cli.app import cli
from tests.conformance import CONFORMANCE, REPO

DOCS = REPO / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("reference_gen", DOCS / "reference_gen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_gen"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_the_site_builds_strictly(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is a test dependency (pip install -e '.[test]')"
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for page in ("reference/cli", "reference/minicluster", "reference/rabbit", "reference/python"):
        assert (tmp_path / "site" / page / "index.html").is_file()
    minicluster = (tmp_path / "site" / "reference" / "minicluster" / "index.html").read_text()
    assert "spec.pod.securityProfile" in minicluster  # generated, not the stub


def test_every_verb_and_option_has_its_help_in_the_cli_reference():
    page = gen.cli_page()
    found = gen.commands()
    from fluxhop.cli.app import VERBS

    assert {title.split()[1] for title, _ in found} == set(VERBS)
    for title, command in found:
        assert f"## `{title}`" in page
        assert (command.help or "").strip(), f"{title} has no help"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert (param.help or "").strip(), f"{title} {param.opts} has no help"
                assert f"`{param.opts[0]}`" in page


def _crd_paths() -> list[str]:
    crd = yaml.safe_load(
        (CONFORMANCE / "crds" / "flux-framework.org_miniclusters.yaml").read_text()
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    root = version["schema"]["openAPIV3Schema"]["properties"]["spec"]

    def walk(node: dict, path: str) -> list[str]:
        if node.get("type") == "array" and "items" in node:
            return walk(node["items"], path + "[]")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            return walk(extra, path + ".*")
        out = []
        for key, child in (node.get("properties") or {}).items():
            out += [f"{path}.{key}", *walk(child, f"{path}.{key}")]
        return out

    return walk(root, "spec")


def _covered(path: str, rows: dict) -> bool:
    """The path has a row, or lies under a row held whole (a mapping or a
    Kubernetes type, e.g. seLinuxOptions, whose keys are Kubernetes')."""
    if path in rows:
        return True
    parent = re.sub(r"(\.[^.\[]+|\[\]|\.\*)$", "", path)
    while parent and parent != path:
        if parent in rows:
            return rows[parent].opaque
        path, parent = parent, re.sub(r"(\.[^.\[]+|\[\]|\.\*)$", "", parent)
    return False


def test_every_crd_field_is_implemented_warned_or_refused():
    rows = {row.path: row for row in gen.minicluster_rows()}
    missing = [path for path in _crd_paths() if not _covered(path, rows)]
    assert missing == [], f"CRD fields missing from the reference: {missing}"


def test_every_field_fluxhop_adds_is_an_extension_with_a_note():
    crd = set(_crd_paths())
    rows = gen.minicluster_rows()
    for row in rows:
        if not row.path.startswith("spec.") or row.status in ("warned", "refused"):
            continue
        if row.path not in crd:
            assert row.status == "fluxhop extension" and row.note, row.path
    assert {r.path for r in rows if r.status == "fluxhop extension"} == set(gen.extensions())


def test_the_rabbit_reference_names_every_key_the_parser_takes():
    from fluxhop.rabbit.request import ATTRIBUTES, KEYS

    page = gen.rabbit_page()
    for key in KEYS:
        takes, default, does = ATTRIBUTES[key]
        assert f"`rabbit.mpi.{key}`" in page and takes and default and does


def test_every_public_client_method_has_a_docstring():
    undocumented = [
        name
        for name, member in inspect.getmembers(Client)
        if not name.startswith("_")
        and not (member.__doc__ if isinstance(member, property) else inspect.getdoc(member))
    ]
    assert undocumented == []


def test_the_readme_is_the_short_entry_and_keeps_the_ci_blocks():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 90
    for block in ("install-and-run", "build-and-test"):  # what .ci/run runs
        assert f"<!-- ci: {block} -->" in readme
    assert "docs/" in readme and "mkdocs" in readme


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_every_page_is_in_the_navigation(page):
    nav = (REPO / "mkdocs.yml").read_text()
    assert page in nav


def _shell_commands(text: str) -> list[list[str]]:
    """Every `fluxhop ...` command in the bash blocks of a Markdown page, as
    argv (continuation lines joined, comments dropped, split at ; && and |)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words: list[str] = []
            for word in [*lexer, ";"]:
                if word in (";", "&&", "|", "||"):
                    if words and words[0] == "fluxhop":
                        commands.append(words[1:])
                    words = []
                else:
                    words.append(word)
    return commands


def _parse(argv: list[str]) -> None:
    """Parse argv as `fluxhop` would, down to the verb, without running it."""
    command: click.Command = cli
    ctx = command.make_context("fluxhop", list(argv))
    while isinstance(command, click.Group):
        name, sub, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert sub is not None, f"no verb {name}"
        command, ctx = sub, sub.make_context(name, rest, parent=ctx)


PAGES = sorted([REPO / "README.md", *DOCS.rglob("*.md")])


FILE_OPTIONS = {"-f", "--filename", "--file", "--runtime"}


def _with_files(argv: list[str], scratch: Path) -> list[str]:
    """argv with each file an option names made real: the repository's where
    it has one (examples/...), else an empty stand-in (the docs' job.yaml),
    since a file option checks that its file exists."""
    out = list(argv)
    for i, word in enumerate(argv[:-1]):
        name = argv[i + 1]
        if word in FILE_OPTIONS and name != "-":
            if (REPO / name).is_file():
                out[i + 1] = str(REPO / name)
            else:
                stand_in = scratch / name.lstrip("/")
                stand_in.parent.mkdir(parents=True, exist_ok=True)
                stand_in.touch()
                out[i + 1] = str(stand_in)
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_fluxhop_command_in_the_docs_parses(page, tmp_path):
    for argv in _shell_commands(page.read_text()):
        try:
            _parse(_with_files(argv, tmp_path))
        except click.ClickException as err:
            pytest.fail(f"{page.name}: fluxhop {shlex.join(argv)}: {err.format_message()}")
