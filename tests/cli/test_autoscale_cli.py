"""fluxhop autoscale's flags: a bad one is one line, before anything is asked
of a cluster (the verb itself: tests/realk8s/test_autoscale.py)."""

from __future__ import annotations

import pytest

from fluxhop.cli import main


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--scale-down-delay", "-1"], "--scale-down-delay must be 0 or more"),
        (["--interval", "0"], "--interval must be more than 0"),
    ],
)
def test_bad_flags_are_one_line_before_anything_is_asked(capsys, args, says):
    code = main(["autoscale", "work", "--kubeconfig", "/nonexistent", *args])
    err = capsys.readouterr().err
    assert code != 0 and says in err and err.count("\n") == 1, err
