"""CLI start-up stays light: verbs are imported when they run, so
``fluxhop --version`` and ``--help`` load no Kubernetes client, pydantic or
rich, and ``fluxhop render`` loads no Kubernetes client and no rich.
(bench/bench_startup.py measures the time; this guards what is imported.)"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from fluxhop.cli import app
from tests.conformance import REPO

HEAVY = ("lightkube", "httpx2", "pydantic", "rich", "kubernetes")
PROBE = """
import io, json, sys
from contextlib import redirect_stdout
from fluxhop.cli import main
with redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, sorted(sys.modules)]))
"""


def modules_after(*args: str) -> tuple[int, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    code, modules = json.loads(out.splitlines()[-1])
    return code, set(modules)


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_nothing_heavy(args):
    code, modules = modules_after(*args)
    assert code == 0
    assert loaded(modules, HEAVY) == []
    ours = {m for m in modules if m.split(".")[0] == "fluxhop"}
    assert ours <= {
        "fluxhop",
        "fluxhop.version",
        "fluxhop.errors",
        "fluxhop.cli",
        "fluxhop.cli.app",
    }


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_the_bare_version_flag_skips_click_and_says_what_click_says(flag, capsys):
    """``fluxhop --version`` alone is answered before click is imported, in
    the same words click's version option prints for it."""
    from fluxhop.cli import main

    _, modules = modules_after(flag)
    assert "click" not in modules
    assert main([flag]) == 0
    fast = capsys.readouterr().out
    assert app.main([flag]) == 0
    assert fast == capsys.readouterr().out


def test_version_among_other_arguments_is_click_s():
    _, modules = modules_after("--version", "--help")
    assert "click" in modules


def test_render_imports_only_what_rendering_needs():
    code, modules = modules_after("render", "-f", "examples/lammps.yaml")
    assert code == 0
    assert loaded(modules, ("lightkube", "httpx2", "rich", "kubernetes")) == []
    assert not [m for m in modules if m.startswith(("fluxhop.cluster", "fluxhop.local"))]


def test_the_guard_can_fail():
    _, modules = modules_after("list", "--help")
    assert "lightkube" in modules  # a cluster verb does load the client


def test_every_verb_is_registered_with_its_own_help_line():
    ctx = click.Context(app.cli)
    for name, verb in app.VERBS.items():
        command = app.cli.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(1000) == verb.short_help(1000), (
            f"VERBS[{name!r}].help differs from the command's own help"
        )
