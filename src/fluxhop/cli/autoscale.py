"""``fluxhop autoscale NAME``: size a MiniCluster to its Flux queue from this
machine, for users without fluxhop's operator (cluster/autoscale_actions.py)."""

from __future__ import annotations

import time

import click

from fluxhop.cli.kubeopts import connect, kube_options
from fluxhop.cli.params import COUNT, KUBE_NAME, Seconds
from fluxhop.cluster.autoscale_actions import Autoscaler
from fluxhop.errors import InputError, InstanceError, NotFound, Unreachable
from fluxhop.render.targets import Target
from fluxhop.spec.autoscale import DEFAULT_DELAY
from fluxhop.workload.autoscale import Policy


@click.command("autoscale")
@click.argument("name", type=KUBE_NAME)
@click.option(
    "--min-size",
    type=COUNT,
    help="Never fewer nodes (default: the minSize of its spec.autoscale, else 1).",
)
@click.option(
    "--scale-down-delay",
    type=Seconds(0, inclusive=True),
    help="Seconds nodes stay idle before the MiniCluster shrinks, drained first (default: "
    f"its spec.autoscale's scaleDownDelaySeconds, else {DEFAULT_DELAY}).",
)
@click.option(
    "--interval", type=Seconds(0), default=10, show_default=True, help="Seconds between decisions."
)
@click.option(
    "--once",
    is_flag=True,
    help="Make one decision and exit (from a timer: the idle time the delay counts is kept "
    "on the MiniCluster between runs).",
)
@kube_options()
def autoscale_command(
    name: str,
    min_size: int | None,
    scale_down_delay: float | None,
    interval: float,
    once: bool,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
) -> int:
    """Grow a MiniCluster for its pending jobs and shrink it, drained first, when idle."""
    ops = connect(kubeconfig, context, namespace)
    root = ops.require(name)
    asked_min, asked_delay = root.autoscale or (1, DEFAULT_DELAY)
    min_size = asked_min if min_size is None else min_size
    scale_down_delay = asked_delay if scale_down_delay is None else scale_down_delay
    if not 1 <= min_size <= root.max_size:
        raise InputError(
            f"--min-size {min_size} must be between 1 and the MiniCluster's maxSize {root.max_size}"
        )
    if root.target is Target.JOBSET:
        raise InputError(
            f"MiniCluster {name} is a JobSet, which cannot be resized in place; create it with "
            "--target job to autoscale it"
        )
    if (
        root.target is Target.MINICLUSTER
        and (root.obj.get("spec") or {}).get("autoscale") is not None
    ):
        raise InputError(
            f"MiniCluster {name} has spec.autoscale: fluxhop's operator autoscales it "
            "(see its status.autoscale); two autoscalers would undo each other"
        )
    problem = root.resize_problem()
    if problem:
        raise InputError(f"MiniCluster {name} cannot be autoscaled: {problem}")
    policy = Policy(min_size, root.max_size, scale_down_delay)
    scaler = Autoscaler(ops, name, policy)
    while True:
        try:
            before, decision = scaler.step()
        except (InstanceError, NotFound, Unreachable) as err:  # rank 0 restarting: next time
            if once:
                raise
            click.echo(f"minicluster/{name}: no decision: {err}", err=True)
        else:
            change = f"{before} -> {decision.size}" if decision.size != before else f"{before}"
            left = f" (in {decision.wait:.0f}s)" if decision.wait is not None else ""
            click.echo(f"minicluster/{name} size {change}: {decision.reason}{left}")
        if once:
            return 0
        time.sleep(interval)  # a polling period, not a wait for an event
