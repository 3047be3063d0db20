"""Cluster verbs with kubectl's meanings: create, get, list, logs, scale, delete."""

from __future__ import annotations

import json
import sys

import click

from fluxhop.cli.jobflags import JobFlags, job_options
from fluxhop.cli.kubeopts import connect, kube_options, local_option
from fluxhop.cli.params import COUNT, KUBE_NAME, Seconds
from fluxhop.cli.progress import ProgressDisplay
from fluxhop.cli.run import LOCAL_IMAGE, LOCAL_JOIN_TIMEOUT
from fluxhop.cli.session import dispatch_failure
from fluxhop.cli.where import reach
from fluxhop.errors import interrupt_status
from fluxhop.local.store import LocalStore
from fluxhop.render.output import dump_yaml
from fluxhop.workload import Status


def _age(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _table(statuses: list[Status], wide: bool) -> str:
    header = ["NAME", "TARGET", "SIZE", "STATE", "AGE"] + (
        ["MAXSIZE", "PODS", "EXIT"] if wide else []
    )
    rows = [header]
    for s in statuses:
        row = [s.name, s.target, str(s.size), s.state, _age(s.age)]
        if wide:
            pods = ",".join(f"{phase}={n}" for phase, n in sorted(s.pods.items())) or "-"
            row += [str(s.max_size), pods, "-" if s.exit_code is None else str(s.exit_code)]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += [f"{s.name}: {problem}" for s in statuses for problem in s.problems]
    return "\n".join(lines) + "\n"


@click.command("create", context_settings={"allow_interspersed_args": False})
@job_options
@kube_options(short_namespace=False)
@click.option(
    "--wait/--no-wait", default=True, show_default=True, help="Wait until every pod runs."
)
@click.option(
    "--timeout",
    type=Seconds(0),
    default=600,
    show_default=True,
    help="Seconds to wait for the pods.",
)
@local_option(
    "Start the brokers on this machine in the background (no Kubernetes); later "
    "commands with --local find it. Implied when there is no kubeconfig and flux is "
    "installed."
)
def create_command(
    job: JobFlags,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    wait: bool,
    timeout: float,
    local: bool,
) -> int:
    """Create a MiniCluster from -f FILE or from job flags, and leave it running."""
    if local:
        return _create_local(job, timeout)
    spec = job.spec(namespace)  # the flags are checked before anything else
    ops = reach(kubeconfig, context, namespace, local=False, new=True)
    if ops is None:
        return _create_local(job, timeout)
    root = ops.create(spec, job.target, cluster_domain=job.cluster_domain)
    if root.dispatched:
        queued = f"; queue {root.queue} dispatches it to a worker cluster"
    else:
        queued = f"; suspended until queue {root.queue} admits it" if root.queue else ""
    click.echo(
        f"minicluster/{root.name} created ({root.target}, namespace {ops.kube.namespace}{queued})",
        err=True,
    )
    if wait and root.dispatched:
        with ProgressDisplay(root.name) as display:
            there = ops.follow_dispatched(
                root, until_up=True, timeout=timeout, on_progress=display.update,
                on_note=display.note,
            )  # fmt: skip
        if there.ended and there.exit_code:  # it failed (or Kueue ended it) before it was up
            click.echo(f"minicluster/{root.name} {dispatch_failure(there)}", err=True)
            return there.exit_code
        if there.ended:
            click.echo(f"minicluster/{root.name} ran to its end on worker cluster "
                       f"{there.cluster}", err=True)  # fmt: skip
            return 0
        click.echo(
            f"minicluster/{root.name} running on worker cluster {there.cluster}; its pods are "
            "there (--context)",
            err=True,
        )
    elif wait:
        with ProgressDisplay(root.name) as display:
            ops.wait_ready(root, timeout=timeout, on_progress=display.update)
        click.echo(
            f"minicluster/{root.name} running; connect with: fluxhop shell {root.name}", err=True
        )
    return 0


def _create_local(job: JobFlags, timeout: float) -> int:
    spec = job.spec(None, default_image=LOCAL_IMAGE)
    job.note_local()
    try:
        record = LocalStore(join_timeout=min(timeout, LOCAL_JOIN_TIMEOUT)).create(spec)
    except KeyboardInterrupt as err:
        click.echo("fluxhop: interrupted; the brokers are stopped and removed", err=True)
        return interrupt_status(err)
    click.echo(
        f"minicluster/{record.name} created (local, {record.size} brokers): fluxhop submit "
        f"--local {record.name} -- CMD, or flux proxy {record.uri}; "
        f"fluxhop delete --local {record.name} when done",
        err=True,
    )
    return 0


@click.command("get")
@click.argument("name", type=KUBE_NAME)
@kube_options()
@click.option("-o", "--output", type=click.Choice(["wide", "yaml", "json"]), help="Output format.")
@local_option()
def get_command(
    name: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    output: str | None,
    local: bool,
) -> int:
    """Show one MiniCluster."""
    ops = reach(kubeconfig, context, namespace, local=local, name=name)
    if ops is None:
        status = LocalStore().status(name)
        if output in ("yaml", "json"):
            text = json.dumps(status.to_dict(), indent=2) + "\n"
            click.echo(text if output == "json" else dump_yaml([status.to_dict()]), nl=False)
        else:
            click.echo(_table([status], wide=output == "wide"), nl=False)
        return 0
    root = ops.require(name)
    if output in ("yaml", "json"):
        document = {**root.obj, "fluxhop": ops.status(root).to_dict()}
        text = json.dumps(document, indent=2) + "\n" if output == "json" else dump_yaml([document])
        click.echo(text, nl=False)
    else:
        click.echo(_table([ops.status(root)], wide=output == "wide"), nl=False)
    return 0


@click.command("list")
@kube_options()
@click.option("-o", "--output", type=click.Choice(["wide", "json"]), help="Output format.")
@local_option(
    "The MiniClusters on this machine (fluxhop create --local), not on Kubernetes; "
    "implied when there is no kubeconfig and there are some here."
)
def list_command(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    output: str | None,
    local: bool,
) -> int:
    """List the MiniClusters fluxhop created in a namespace."""
    ops = reach(kubeconfig, context, namespace, local=local)
    statuses = LocalStore().list() if ops is None else ops.list()
    if output == "json":
        click.echo(json.dumps([s.to_dict() for s in statuses], indent=2))
    elif statuses:
        click.echo(_table(statuses, wide=output == "wide"), nl=False)
    else:
        click.echo("No MiniClusters found.", err=True)
    return 0


@click.command("logs")
@click.argument("name", type=KUBE_NAME)
@kube_options()
@click.option("-f", "--follow", is_flag=True, help="Keep streaming the output.")
@local_option()
def logs_command(
    name: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    follow: bool,
    local: bool,
) -> int:
    """Print rank 0's output (the job's output)."""
    ops = reach(kubeconfig, context, namespace, local=local, name=name)
    if ops is None:
        lines = LocalStore().logs(name, follow=follow)
    else:
        lines = ops.logs(ops.require(name), follow=follow)
    for line in lines:
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


@click.command("scale")
@click.argument("name", type=KUBE_NAME)
@click.option("--size", type=COUNT, required=True, help="New number of nodes (at most maxSize).")
@kube_options()
def scale_command(
    name: str, size: int, kubeconfig: str | None, context: str | None, namespace: str | None
) -> int:
    """Resize a MiniCluster within its maxSize."""
    ops = connect(kubeconfig, context, namespace)
    root = ops.scale(ops.require(name), size)
    click.echo(f"minicluster/{root.name} scaled to {size}", err=True)
    return 0


@click.command("delete")
@click.argument("name", type=KUBE_NAME)
@kube_options()
@click.option(
    "--ignore-not-found", is_flag=True, help="Succeed when the MiniCluster does not exist."
)
@local_option()
def delete_command(
    name: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    ignore_not_found: bool,
    local: bool,
) -> int:
    """Delete a MiniCluster and everything it owns."""
    from fluxhop.errors import NotFound

    try:
        ops = reach(kubeconfig, context, namespace, local=local, name=name)
        if ops is None:
            LocalStore().delete(name)
        else:
            ops.delete(name)
    except NotFound:
        if ignore_not_found:
            return 0
        raise
    click.echo(f"minicluster/{name} deleted", err=True)
    return 0
