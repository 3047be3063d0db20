"""The ``fluxhop`` command line (and ``flux-hop``, so ``flux hop`` works).

Job-shaping verbs use Flux's short flags (``-N`` nodes, ``-n`` tasks, ``-c``,
``-g``); cluster verbs use kubectl's. Every error is one line on stderr.

The entry points import the CLI inside the same guard that turns Ctrl-C into
one line, so that an interrupt while Python is still loading click prints
``fluxhop: interrupted``, not a traceback. Nothing is imported before it.
"""

from __future__ import annotations

__all__ = ["flux_hop", "main"]

TYPE_CHECKING = False  # see fluxhop/__init__.py: typing is not imported here
if TYPE_CHECKING:
    from collections.abc import Sequence


def _interrupted() -> int:
    import sys

    sys.stderr.write("fluxhop: interrupted\n")
    return 130


def _finished(code: int, argv: Sequence[str] | None) -> int:
    """The command is done: a Ctrl-C now has nothing left to interrupt, and
    while Python shuts down it would kill the process (its handler is gone)
    and lose the exit status. Only for the real command line, not for callers
    that pass ``argv`` (tests, embedding), whose process goes on."""
    if argv is None:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


VERSION_FLAGS = (["--version"], ["-V"])


def _version_only(argv: Sequence[str] | None) -> bool:
    """``fluxhop --version`` alone needs no command framework: importing
    click costs four times what Python itself takes to start, so the bare
    flag is answered here, in click's words (``fluxhop, version X``). Any
    other argument list, ``--version`` among others included, goes to click."""
    if argv is None:
        import sys

        argv = sys.argv[1:]
    return list(argv) in VERSION_FLAGS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fluxhop``."""
    if _version_only(argv):
        from fluxhop.version import __version__

        print(f"fluxhop, version {__version__}")
        return 0
    try:
        from fluxhop.cli.app import main as run
    except KeyboardInterrupt:
        return _interrupted()
    return _finished(run(argv), argv)


def flux_hop(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``flux-hop``: ``flux hop ARGS`` is ``fluxhop hop ARGS``."""
    try:
        from fluxhop.cli.app import flux_hop as run
    except KeyboardInterrupt:
        return _interrupted()
    return _finished(run(argv), argv)
