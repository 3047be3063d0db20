"""CLI plumbing: version, one-line errors, exit statuses."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import click
import pytest

from fluxhop.cli import app
from fluxhop.errors import InputError
from tests.conformance import REPO
from tests.processes import default_signals


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


FLUXHOP = [sys.exec_prefix + "/bin/fluxhop"]


# Python is started first and imports fluxhop when told to: a Ctrl-C during
# CPython's own start-up (its site module) or in this launcher line is
# Python's, before any fluxhop code runs; from fluxhop's first import on it
# is ours, and no traceback may then show a frame of fluxhop's files.
LAUNCHER = (
    "import sys; print('ready', flush=True); sys.stdin.readline(); "
    "from fluxhop.cli import main; sys.exit(main())"
)


# The only fluxhop code that can run before the guard in fluxhop.cli.main: the
# module bodies of the packages `from fluxhop.cli import main` imports first
# (a signal between their bytecodes, microseconds, is Python's to report).
_UNGUARDED = ("fluxhop/__init__.py", "fluxhop/version.py", "fluxhop/cli/__init__.py")


def _before_the_guard(err: str) -> bool:
    frames = [
        line
        for line in err.splitlines()
        if line.strip().startswith("File ") and "/fluxhop/" in line
    ]
    return all(any(name in f for name in _UNGUARDED) and "in <module>" in f for f in frames)


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5])
def test_ctrl_c_while_starting_up_is_one_line(delay):
    """Whenever Ctrl-C comes in the first half second - while Python loads
    click, the verb, pydantic - it is one line and exit 130, not a traceback."""
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, "render", "-f", "examples/lammps.yaml"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=default_signals,
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    process.stdin.write("go\n")
    process.stdin.flush()
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    if "Traceback" in err:  # only where fluxhop's guard had not started yet
        assert _before_the_guard(err), err
        return
    if process.returncode != 0:  # else it finished before the signal came
        assert process.returncode == 130
        assert err.lstrip("\n") == "fluxhop: interrupted\n"


def test_sigterm_handler_is_restored_after_main(capsys):
    before = signal.getsignal(signal.SIGTERM)
    assert app.main(["--version"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_interrupt_wrapped_by_python_is_still_an_interrupt(boom_command, capsys, monkeypatch):
    """Python 3.11 wraps a KeyboardInterrupt raised in a class's __set_name__
    (as when Ctrl-C comes while a module defines its classes) in RuntimeError."""

    @app.cli.command("wrapped-test")
    def wrapped() -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("Error calling __set_name__") from interrupt

    try:
        assert app.main(["wrapped-test"]) == 130
    finally:
        app.cli.commands.pop("wrapped-test")
    assert capsys.readouterr().err.lstrip("\n") == "fluxhop: interrupted\n"
