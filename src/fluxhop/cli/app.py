"""The click group, and the one place errors become exit statuses."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from fluxhop.errors import FluxhopError
from fluxhop.version import __version__

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="fluxhop")
def cli() -> None:
    """Run Flux MiniClusters on Kubernetes.

    Job verbs take Flux's flags (-N nodes, -n tasks, -c cores, -g gpus);
    cluster verbs take kubectl's (-n namespace, -o output).
    """


def _fail(message: str, code: int) -> int:
    click.echo(f"fluxhop: {message}", err=True)
    return code


def _load_commands() -> None:
    """Import the verb modules, which register themselves on ``cli``."""
    from fluxhop.cli import cluster, connect, hop, render, run, trainer  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fluxhop``: run the CLI, map errors to one line."""
    from fluxhop.cli.common import install_warning_printer

    args = list(sys.argv[1:] if argv is None else argv)
    install_warning_printer()
    _load_commands()
    try:
        result = cli.main(args=args, prog_name="fluxhop", standalone_mode=False)
    except FluxhopError as err:
        for line in getattr(err, "context", []):
            click.echo(f"  | {line}", err=True)
        return _fail(str(err), err.exit_code)
    except click.exceptions.Exit as done:
        return int(done.exit_code or 0)
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx else "fluxhop"
        return _fail(f"{err.format_message()} (see '{where} --help')", err.exit_code)
    except click.ClickException as err:
        return _fail(err.format_message(), err.exit_code)
    except click.exceptions.Abort:
        return _fail("interrupted", 130)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as err:  # a bug: still one line, traceback on request
        if os.environ.get("FLUXHOP_DEBUG"):
            raise
        detail = " ".join(str(err).split())
        return _fail(
            f"internal error: {type(err).__name__}: {detail} (set FLUXHOP_DEBUG=1 for a traceback)",
            70,
        )
    return result if isinstance(result, int) else 0


def flux_hop(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``flux-hop``: ``flux hop ARGS`` is ``fluxhop hop ARGS``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return main(["hop", *args])


def run() -> None:  # pragma: no cover - console script shim
    sys.exit(main())
