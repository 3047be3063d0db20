"""CLI plumbing: version, one-line errors, exit statuses."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from fluxhop.cli import app
from fluxhop.errors import InputError


def test_version(capsys):
    assert app.main(["--version"]) == 0
    assert "0.1.0" in capsys.readouterr().out


def test_unknown_command_is_one_line(capsys):
    assert app.main(["no-such-verb"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fluxhop: ")


@pytest.fixture
def boom_command():
    calls = []

    @app.cli.command("boom-test")
    @click.argument("kind")
    def boom(kind: str) -> int:
        calls.append(kind)
        if kind == "input":
            raise InputError("spec.size: must be >= 1; set size: 1 or more")
        if kind == "bug":
            raise RuntimeError("unexpected\nmultiline")
        if kind == "interrupt":
            raise KeyboardInterrupt
        return 7

    yield calls
    app.cli.commands.pop("boom-test")


@pytest.mark.parametrize(
    "kind, code, text",
    [
        ("input", 2, "fluxhop: spec.size: must be >= 1; set size: 1 or more\n"),
        (
            "bug",
            70,
            "fluxhop: internal error: RuntimeError: unexpected multiline (set FLUXHOP_DEBUG=1 for a traceback)\n",
        ),
        ("interrupt", 130, "fluxhop: interrupted\n"),
    ],
)
def test_errors_become_one_line_and_a_status(boom_command, capsys, kind, code, text, monkeypatch):
    monkeypatch.delenv("FLUXHOP_DEBUG", raising=False)
    assert app.main(["boom-test", kind]) == code
    # click moves past the terminal's "^C" with a newline of its own first
    assert capsys.readouterr().err.lstrip("\n") == text


def test_command_return_value_is_the_exit_status(boom_command):
    assert app.main(["boom-test", "ok"]) == 7


def test_console_scripts_are_installed():
    bindir = sys.exec_prefix + "/bin"
    out = subprocess.run([f"{bindir}/fluxhop", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "fluxhop" in out.stdout
    hop = subprocess.run([f"{bindir}/flux-hop", "--help"], capture_output=True, text=True)
    assert hop.returncode == 0 and "--rabbits" in hop.stdout
