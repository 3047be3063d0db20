"""Shell completion: the script for each shell, and completion that works."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fluxhop.cli import main

FLUXHOP = [sys.exec_prefix + "/bin/fluxhop"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_for_each_shell(capsys, shell):
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "_FLUXHOP_COMPLETE" in script and "fluxhop" in script


def test_the_bash_script_is_valid_bash(capsys, tmp_path):
    main(["completion", "bash"])
    path = tmp_path / "fluxhop.bash"
    path.write_text(capsys.readouterr().out)
    subprocess.run(["bash", "-n", str(path)], check=True)


def complete(words: str, cword: int) -> list[str]:
    env = {
        **os.environ,
        "_FLUXHOP_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
    }
    out = subprocess.run(FLUXHOP, env=env, capture_output=True, text=True, check=True).stdout
    return [line.split(",", 1)[1] for line in out.splitlines() if "," in line]


def test_verbs_and_options_complete():
    assert {"render", "run"} <= set(complete("fluxhop r", 1))
    assert "--target" in complete("fluxhop render --ta", 2)
    assert complete("fluxhop render --target j", 3) == ["job", "jobset"]


def test_an_unknown_shell_is_one_line(capsys):
    assert main(["completion", "tcsh"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'tcsh'" in err


def test_completion_is_listed_in_help(capsys):
    assert main(["--help"]) == 0
    assert "completion" in capsys.readouterr().out
