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
