"""The click group, the list of verbs, and the one place errors become exit statuses.

Verbs are registered here, explicitly, and imported only when they run:
``fluxhop --version`` and ``fluxhop --help`` load no Kubernetes client, no
pydantic and no rich, and ``fluxhop render`` loads only what rendering needs
(bench/bench_startup.py measures it).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import click

from fluxhop.errors import FluxhopError, FluxhopWarning, Terminated, interrupt_status
from fluxhop.version import __version__

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Verb(NamedTuple):
    """Where a verb lives, and the line ``fluxhop --help`` shows for it
    without importing it (a test keeps the line equal to the command's own)."""

    module: str
    command: str
    help: str

    def short_help(self, limit: int) -> str:
        """The line as click shortens a command's help for a listing."""
        return click.Command(None, help=self.help).get_short_help_str(limit)


VERBS: dict[str, Verb] = {
    "attach": Verb(
        "fluxhop.cli.inside",
        "attach_command",
        "Stream a job's output; exit with its exit code (flux job attach).",
    ),
    "cancel": Verb("fluxhop.cli.inside", "cancel_command", "Cancel jobs in a running MiniCluster."),
    "completion": Verb(
        "fluxhop.cli.completion",
        "completion_command",
        "Print the shell completion script for bash, zsh or fish.",
    ),
    "create": Verb(
        "fluxhop.cli.cluster",
        "create_command",
        "Create a MiniCluster from -f FILE or from job flags, and leave it running.",
    ),
    "delete": Verb(
        "fluxhop.cli.cluster", "delete_command", "Delete a MiniCluster and everything it owns."
    ),
    "get": Verb("fluxhop.cli.cluster", "get_command", "Show one MiniCluster."),
    "hop": Verb(
        "fluxhop.cli.hop",
        "hop_command",
        "Create a MiniCluster on rabbit nodes, as a job's -S rabbit.mpi.* would.",
    ),
    "jobs": Verb(
        "fluxhop.cli.inside",
        "jobs_command",
        "List the jobs of a running MiniCluster (like flux jobs).",
    ),
    "list": Verb(
        "fluxhop.cli.cluster",
        "list_command",
        "List the MiniClusters fluxhop created in a namespace.",
    ),
    "logs": Verb(
        "fluxhop.cli.cluster", "logs_command", "Print rank 0's output (the job's output)."
    ),
    "autoscale": Verb(
        "fluxhop.cli.autoscale",
        "autoscale_command",
        "Grow a MiniCluster for its pending jobs and shrink it, drained first, when idle.",
    ),
    "operator": Verb(
        "fluxhop.cli.operator",
        "operator_command",
        "Reconcile MiniCluster resources in the cluster (kopf; replaces the Flux Operator's controller).",
    ),
    "proxy": Verb(
        "fluxhop.cli.connect",
        "proxy_command",
        "Run the local `flux proxy` into the MiniCluster (a shell, or COMMAND).",
    ),
    "render": Verb(
        "fluxhop.cli.render",
        "render_command",
        "Print the objects that run a MiniCluster (kubectl apply -f - ready).",
    ),
    "run": Verb(
        "fluxhop.cli.run",
        "run_command",
        "Run COMMAND on a new MiniCluster (fluxhop run -N4 -n8 --image IMG -- CMD ARGS...).",
    ),
    "scale": Verb(
        "fluxhop.cli.cluster", "scale_command", "Resize a MiniCluster within its maxSize."
    ),
    "shell": Verb(
        "fluxhop.cli.connect",
        "shell_command",
        "Open an interactive shell in rank 0 with FLUX_URI set (kubectl exec -it).",
    ),
    "status": Verb(
        "fluxhop.cli.inside",
        "status_command",
        "Brokers per rank, resources, the queue, and the instance's metrics (jobs, pending asks).",
    ),
    "submit": Verb(
        "fluxhop.cli.inside",
        "submit_command",
        "Submit COMMAND into a running MiniCluster; print its job ID (fluxhop submit NAME -- CMD).",
    ),
    "trainer": Verb(
        "fluxhop.cli.trainer",
        "trainer",
        "Kubeflow Trainer TrainJobs whose runtime has a flux ML policy.",
    ),
}


class LazyGroup(click.Group):
    """A group whose verbs are imported on first use (click's documented
    lazy-loading pattern), listed in ``--help`` from :data:`VERBS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *VERBS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in VERBS:
            verb = VERBS[name]
            command = getattr(importlib.import_module(verb.module), verb.command)
            if not isinstance(command, click.Command) or command.name != name:
                raise RuntimeError(f"{verb.module}.{verb.command} is not the {name!r} command")
            self.add_command(command)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)  # as click.Group does
        rows = []
        for name in names:
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, VERBS[name].short_help(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="fluxhop")
def cli() -> None:
    """Run Flux MiniClusters on Kubernetes.

    Job verbs take Flux's flags (-N nodes, -n tasks, -c cores, -g gpus);
    cluster verbs take kubectl's (-n namespace, -o output).
    """


def install_warning_printer() -> None:
    """Show each FluxhopWarning as one ``fluxhop: warning:`` line on stderr."""

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, FluxhopWarning):
            click.echo(f"fluxhop: warning: {message}", err=True)
        else:
            click.echo(f"fluxhop: warning: {category.__name__}: {message}", err=True)

    warnings.showwarning = show  # type: ignore[assignment]
    warnings.simplefilter("default", FluxhopWarning)


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _interrupted(err: BaseException) -> int:
    # click turns an interrupt into Abort; the interrupt itself is its cause
    cause = err.__cause__ if isinstance(err, click.exceptions.Abort) else err
    code = interrupt_status(cause) if cause is not None else 130
    return _fail("terminated" if code == 143 else "interrupted", code)


def _interrupt_in(err: BaseException) -> KeyboardInterrupt | None:
    """A Ctrl-C that Python wrapped in another error on its way up (Python 3.11
    wraps one raised in a class's ``__set_name__`` in a RuntimeError)."""
    seen = 0
    cause: BaseException | None = err
    while cause is not None and seen < 20:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


def _fail(message: str, code: int) -> int:
    click.echo(f"fluxhop: {message}", err=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fluxhop``: run the CLI, map errors to one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    install_warning_printer()
    if threading.current_thread() is not threading.main_thread():
        return _main(args)  # signal handlers can only be set in the main thread
    # SIGTERM (kill, a CI runner, a pod stop) runs the cleanup Ctrl-C runs
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(args: list[str]) -> int:
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
    except (click.exceptions.Abort, KeyboardInterrupt) as err:
        return _interrupted(err)
    except Exception as err:  # a bug: still one line, traceback on request
        interrupt = _interrupt_in(err)
        if interrupt is not None:
            return _interrupted(interrupt)
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
