"""``fluxhop run``: create a MiniCluster, run a command in it, clean up.

Flux's flags shape the job (-N nodes, -n tasks, -c cores per task, -g GPUs
per task; see jobflags.py); Kubernetes targeting is long-only (--namespace,
--context).
"""

from __future__ import annotations

import sys

import click

from fluxhop.cli.common import echo_objects, output_option
from fluxhop.cli.jobflags import JobFlags, job_options
from fluxhop.cli.kubeopts import kube_options
from fluxhop.cli.params import Seconds
from fluxhop.cli.session import run_root
from fluxhop.cli.where import reach
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import interrupt_status
from fluxhop.local.backend import LocalMiniClusters
from fluxhop.render import render
from fluxhop.render.targets import Target
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["run_command", "run_local", "run_on_cluster"]

RUN_SETTINGS = {"allow_interspersed_args": False}
LOCAL_IMAGE = "local"  # --local runs no container; the spec still names an image
LOCAL_JOIN_TIMEOUT = 60.0  # brokers on one host join in seconds; --timeout can lower it


@click.command("run", context_settings=RUN_SETTINGS)
@job_options
@kube_options(short_namespace=False)
@click.option("--dry-run", is_flag=True, help="Print the objects instead of creating them.")
@output_option("--output")
@click.option("--keep", is_flag=True, help="Leave the MiniCluster in place when the job ends.")
@click.option(
    "--timeout",
    type=Seconds(0),
    default=600,
    show_default=True,
    help="Seconds to wait for rank 0 to start (the job itself may run longer).",
)
@click.option(
    "--local",
    is_flag=True,
    help="Run the brokers on this machine with the flux on PATH (no Kubernetes); "
    "the default when no kubeconfig is set up and flux is installed.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="With --local: show the brokers' log lines (quiet by default, like flux start).",
)
def run_command(
    job: JobFlags,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    dry_run: bool,
    output: str,
    keep: bool,
    timeout: float,
    local: bool,
    verbose: bool,
) -> int:
    """Run COMMAND on a new MiniCluster (fluxhop run -N4 -n8 --image IMG -- CMD ARGS...).

    Streams rank 0's output, exits with the job's exit code, and deletes the
    MiniCluster afterwards (also on Ctrl-C) unless --keep is given.
    """
    spec = job.spec(namespace, default_image=LOCAL_IMAGE if local else None)
    target, cluster_domain = job.target, job.cluster_domain
    if dry_run:
        echo_objects(render(spec, target, cluster_domain=cluster_domain), output)
        return 0
    ops = reach(kubeconfig, context, namespace, local=local, new=True)
    if ops is None:
        job.note_local()
        return run_local(spec, timeout=timeout, verbose=verbose)
    return run_on_cluster(spec, target, cluster_domain, ops, keep=keep, timeout=timeout)


def run_local(spec: MiniCluster, *, timeout: float, verbose: bool = False) -> int:
    """Run ``spec`` as brokers on this machine (the local backend, as
    ``Client(backend="local")`` has it); always stop them afterwards."""
    local = LocalMiniClusters(
        join_timeout=min(timeout, LOCAL_JOIN_TIMEOUT),
        stdout=sys.stdout,
        stderr=sys.stderr,
        verbose=verbose,
    )
    try:
        name = local.create(spec)
        if not local.require(name).interactive:
            code = local.wait(name, None).exit_code
            return 0 if code is None else code
        uri = local.wait_ready(name)
        try:  # from here on, Ctrl-C is how the user ends the instance: exit 0
            click.echo(
                f"fluxhop: MiniCluster {spec.name} is up: {spec.spec.size} brokers on this "
                f"machine. Use it with: flux proxy {uri}  (Ctrl-C shuts it down)",
                err=True,
            )
            return local.wait(name, None).exit_code or 0
        except KeyboardInterrupt:
            click.echo(f"fluxhop: shutting down {spec.name}", err=True)
            return 0
    except KeyboardInterrupt as err:
        click.echo("fluxhop: interrupted; stopping the brokers", err=True)
        return interrupt_status(err)
    finally:
        local.close()


def run_on_cluster(
    spec: MiniCluster,
    target: Target,
    cluster_domain: str,
    ops: MiniClusters,
    *,
    keep: bool,
    timeout: float,
) -> int:
    """Create, stream rank 0, return its exit code; clean up unless ``keep``."""
    interactive = (
        not spec.spec.flux_container.command and not spec.spec.flux_container.commands.script
    )
    return run_root(
        spec.name,
        lambda: ops.create(spec, target, cluster_domain=cluster_domain),
        ops,
        interactive=interactive,
        keep=keep,
        timeout=timeout,
    )
