"""The one check every hostile case makes of the CLI's answer."""

from __future__ import annotations

from fluxhop.cli import main


def one_line(capsys, *args: str) -> tuple[int, str]:
    """Run the CLI; its stderr must be one ``fluxhop:`` line, never a traceback
    or an internal error, and nothing may reach stdout. Returns the exit
    status and that line."""
    code = main(list(args))
    captured = capsys.readouterr()
    err = captured.err
    assert captured.out == "", captured.out[:200]
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and err.startswith("fluxhop: "), err
    return code, err


def one_line_after_warnings(capsys, *args: str) -> tuple[int, str]:
    """As one_line, after any ``fluxhop: warning:`` lines (e.g. where an
    interactive MiniCluster keeps rank 0's state), which it leaves out."""
    code = main(list(args))
    captured = capsys.readouterr()
    assert captured.out == "", captured.out[:200]
    assert "Traceback" not in captured.err, captured.err
    lines = [line for line in captured.err.splitlines() if not line.startswith("fluxhop: warning:")]
    assert len(lines) == 1 and lines[0].startswith("fluxhop: "), captured.err
    assert "internal error" not in lines[0], captured.err
    return code, lines[0]
