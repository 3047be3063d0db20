"""Verbs on a running MiniCluster's instance, from this machine: submit,
jobs, status, cancel, attach (rank 0's flux through kubectl exec)."""

from __future__ import annotations

import json
from typing import Any

import click
from click.core import ParameterSource

from fluxhop.cli.common import shortened
from fluxhop.cli.jobflags import flux_job_options, pop_flux_options, slot_options
from fluxhop.cli.kubeopts import kube_options, local_option
from fluxhop.cli.params import FILE, KUBE_NAME
from fluxhop.cli.where import reach
from fluxhop.cluster.inside import Inside
from fluxhop.documents import read_input
from fluxhop.errors import InputError
from fluxhop.flux.jobspec import submittable
from fluxhop.local.inside import LocalInside
from fluxhop.local.store import LocalStore
from fluxhop.spec.flags import parse_env
from fluxhop.workload.inside import InstanceStatus, Job, submit_args
from fluxhop.workload.verbs import FluxVerbs

__all__ = ["metrics_block", "status_table", "table"]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines) + "\n"


def _inside(
    name: str, kubeconfig: str | None, context: str | None, namespace: str | None, local: bool
) -> FluxVerbs:
    ops = reach(kubeconfig, context, namespace, local=local, name=name)
    if ops is None:
        store = LocalStore()
        return LocalInside(lambda name, submit: store.running(name, submit=submit).flux_root)
    return Inside(ops, kubeconfig=kubeconfig, context=context)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.3f}s"
    if seconds < 3600:
        return f"{seconds / 60:.2f}m"
    return f"{seconds / 3600:.2f}h"


def jobs_table(jobs: list[Job]) -> str:
    rows = [["JOBID", "USER", "NAME", "ST", "NTASKS", "NNODES", "TIME", "INFO"]]
    for job in jobs:
        rows.append(
            [
                job.id,
                job.user,
                job.name,
                job.st,
                str(job.ntasks),
                str(job.nnodes),
                _duration(job.runtime),
                job.nodelist,
            ]
        )
    return table(rows)


def status_table(status: InstanceStatus) -> str:
    out = f"brokers: {status.up} up, {status.down} down\n"
    out += table(
        [["RANK", "NODE", "STATE"]] + [[str(b.rank), b.node, b.state] for b in status.brokers]
    )
    rows = [["RESOURCES", "NODES", "CORES", "GPUS", "RANKS"]]
    for state, counts in status.resources.items():
        rows.append(
            [
                state,
                str(counts["nodes"]),
                str(counts["cores"]),
                str(counts["gpus"]),
                counts["ranks"],
            ]
        )
    out += table(rows)
    out += "".join(f"{line}\n" for line in status.queue)
    if status.metrics is not None:
        out += metrics_block(status.metrics)
    elif status.metrics_error is not None:
        out += f"metrics: unavailable ({status.metrics_error})\n"
    return out


def _counts(counts: dict[str, int], *states: str) -> str:
    return ", ".join(f"{counts[state]} {state}" for state in states)


def metrics_block(metrics: dict[str, Any]) -> str:
    """metrics.py's numbers for a person: jobs, what the pending jobs ask
    for, nodes, brokers, results, and the jobs of each configured queue
    (pending is depend + priority + sched, as flux jobs --stats counts it)."""

    def by_state(counts: dict[str, int], held: int = 0) -> str:
        pending = counts["depend"] + counts["priority"] + counts["sched"]
        return (
            f"{pending} pending{f' ({held} held)' if held else ''}, {counts['run']} running, "
            + _counts(counts, "cleanup", "inactive")
        )

    rows = [
        ["metrics:", ""],
        ["  jobs", by_state(metrics["jobs"], metrics["jobs_held"])],
        [
            "  pending",
            f"{metrics['pending_nodes']} nodes, {metrics['pending_cores']} cores, "
            f"{metrics['pending_gpus']} GPUs asked for; the largest ask "
            f"{metrics['pending_max_nodes']} nodes, {metrics['pending_max_cores']} cores",
        ],
        [
            "  nodes",
            _counts(metrics["nodes"], "free", "allocated", "down")
            + "; "
            + _counts(metrics["nodes_drain"], "drained", "draining"),
        ],
        ["  brokers", _counts(metrics["brokers"], "online", "offline", "lost")],
        [
            "  results",
            _counts(metrics["jobs_result"], "completed", "failed", "canceled", "timeout"),
        ],
    ]
    for queue, counts in sorted(metrics["queue_jobs"].items()):
        rows.append([f"  queue {queue}", by_state(counts)])
    rows.extend(_health_rows(metrics))
    return table(rows)


def _health_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """spec.health's checks, each one's last results on the online ranks, and
    the drains by reason (a metrics.py older than spec.health has neither)."""
    rows = []
    details = metrics.get("health") or {}
    for check, counts in sorted((metrics.get("health_checks") or {}).items()):
        said = f"{counts.get('pass', 0)} passing, {counts.get('fail', 0)} failing"
        failing = details.get(check)
        if failing:
            line = str(failing.get("line", ""))
            line = line if len(line) <= 40 else line[:37] + "..."
            said += f" (ranks {failing.get('failing')}: {line})"
        rows.append([f"  health {check}", said])
    by_reason = metrics.get("nodes_drain_by_reason") or {}
    causes = ("health", "autoscale", "other")
    drained = {c: sum(int(s.get(c, 0)) for s in by_reason.values()) for c in causes}
    if any(drained.values()):
        rows.append(["  drained by", ", ".join(f"{n} {c}" for c, n in drained.items())])
    lead = metrics.get("lead") or {}
    if lead.get("restarts"):
        rows.append(["  restarts", f"{lead['restarts']} from the kept state, last {lead['last']}"])
    return rows


_output = click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)


def _submit_options(func: Any) -> Any:
    for option in reversed(
        [
            click.option("-N", "--nodes", type=int, help="Nodes for the job."),
            click.option("-n", "--ntasks", type=int, help="Tasks."),
            *slot_options(),
            *flux_job_options(),
            click.option(
                "--env",
                multiple=True,
                metavar="KEY=VALUE",
                help="Environment variable of the job (repeatable).",
            ),
            click.option(
                "--cc", metavar="IDSET", help="Submit one job per id (e.g. 1-100), in one exec."
            ),
            click.option(
                "--watch", is_flag=True, help="Stream the job's output; exit with its exit code."
            ),
            click.option(
                "-f",
                "--file",
                "jobspec",
                type=FILE,
                help="Submit this Flux jobspec (YAML or JSON, V1) instead of a command "
                "(flux job submit); the job's shape is the jobspec's.",
            ),
        ]
    ):
        func = option(func)
    return func


@click.command("submit")
@click.argument("name", type=KUBE_NAME)
@_submit_options
@kube_options(short_namespace=False)
@local_option()
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def submit_command(
    name: str,
    command: tuple[str, ...],
    jobspec: str | None,
    nodes: int | None,
    ntasks: int | None,
    cores: int | None,
    gpus: int | None,
    cc: str | None,
    watch: bool,
    env: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    local: bool,
    **flux: Any,
) -> int:
    """Submit COMMAND into a running MiniCluster; print its job ID (fluxhop submit NAME -- CMD)."""
    if jobspec is not None:
        return _submit_jobspec(name, jobspec, command, watch, kubeconfig, context, namespace, local)
    try:  # bad flags are one line here, before anything connects
        options = pop_flux_options(flux).words()
        options += [f"--env={key}={value}" for key, value in parse_env(env).items()]
        shape = {"nodes": nodes, "ntasks": ntasks, "cores": cores, "gpus": gpus, "options": options}
        submit_args(list(command), cc=cc, watch=watch, **shape)
    except InputError as err:
        raise shortened(err) from None
    inside = _inside(name, kubeconfig, context, namespace, local)
    if watch:
        return inside.submit_watch(name, list(command), cc=cc, **shape)
    for jobid in inside.submit(name, list(command), cc=cc, **shape):
        click.echo(jobid)
    return 0


# what -f JOBSPEC goes with; every other submit option shapes the job, which the jobspec does
_BESIDE_A_JOBSPEC = {"name", "jobspec", "command", "watch", "kubeconfig", "context", "namespace",
                     "local", "request_timeout"}  # fmt: skip


def _submit_jobspec(name: str, path: str, command: tuple[str, ...], watch: bool,
                    kubeconfig: str | None, context: str | None, namespace: str | None,
                    local: bool) -> int:  # fmt: skip
    """``submit -f``: the jobspec is the whole job, checked before anything connects."""
    if command:
        raise InputError("give a command or -f JOBSPEC, not both")
    ctx = click.get_current_context()
    shaping = [p.opts[-1] for p in ctx.command.params if p.name not in _BESIDE_A_JOBSPEC
               and ctx.get_parameter_source(p.name or "") is ParameterSource.COMMANDLINE]  # fmt: skip
    if shaping:
        raise InputError(
            f"-f JOBSPEC is the whole job: write what {shaping[0]} says in the jobspec, "
            "not as a flag"
        )
    spec = submittable(read_input(path, "jobspec"), f"-f {path}")
    inside = _inside(name, kubeconfig, context, namespace, local)
    jobid = inside.submit_jobspec(name, spec)
    if watch:
        return inside.attach(name, jobid)
    click.echo(jobid)
    return 0


@click.command("jobs")
@click.argument("name", type=KUBE_NAME)
@click.option("-a", "--all", "all_jobs", is_flag=True, help="Also the jobs that have finished.")
@_output
@kube_options()
@local_option()
def jobs_command(
    name: str,
    all_jobs: bool,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    local: bool,
) -> int:
    """List the jobs of a running MiniCluster (like flux jobs)."""
    jobs = _inside(name, kubeconfig, context, namespace, local).jobs(name, all_jobs=all_jobs)
    if output == "json":
        click.echo(json.dumps([job.to_dict() for job in jobs], indent=2))
    else:
        click.echo(jobs_table(jobs), nl=False)
    return 0


@click.command("status")
@click.argument("name", type=KUBE_NAME)
@_output
@kube_options()
@local_option()
def status_command(
    name: str,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    local: bool,
) -> int:
    """Brokers per rank, resources, the queue, and the instance's metrics (jobs, pending asks)."""
    status = _inside(name, kubeconfig, context, namespace, local).status(name)
    if output == "json":
        click.echo(json.dumps(status.to_dict(), indent=2))
    else:
        click.echo(status_table(status), nl=False)
    return 0


@click.command("cancel")
@click.argument("name", type=KUBE_NAME)
@click.argument("jobids", nargs=-1, required=True)
@kube_options()
@local_option()
def cancel_command(
    name: str,
    jobids: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    local: bool,
) -> int:
    """Cancel jobs in a running MiniCluster."""
    _inside(name, kubeconfig, context, namespace, local).cancel(name, list(jobids))
    return 0


@click.command("attach")
@click.argument("name", type=KUBE_NAME)
@click.argument("jobid")
@kube_options()
@local_option()
def attach_command(
    name: str,
    jobid: str,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    local: bool,
) -> int:
    """Stream a job's output; exit with its exit code (flux job attach)."""
    return _inside(name, kubeconfig, context, namespace, local).attach(name, jobid)
