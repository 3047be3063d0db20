"""``fluxhop operator``: run fluxhop as the controller of MiniCluster resources."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from fluxhop.cli.params import KUBE_NAME, URL, Seconds
from fluxhop.errors import InputError, LocalToolMissing

__all__ = ["operator_command"]


F = TypeVar("F", bound=Callable[..., Any])
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace() -> str | None:
    """The namespace this operator's pod runs in (deploy/ sets POD_NAMESPACE
    from the downward API; the service account's file says it too), or None
    outside a pod."""
    named = os.environ.get("POD_NAMESPACE", "").strip()
    if not named and SERVICE_ACCOUNT_NAMESPACE.is_file():
        named = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return named or None


def _interval(flag: str, default: float, text: str) -> Callable[[F], F]:
    """A timer's interval: seconds, 0.1 at least."""
    return click.option(flag, type=Seconds(0.1, inclusive=True), default=default,
                        show_default=True, help=text)  # fmt: skip


@click.command("operator")
@click.option(
    "-n",
    "--namespace",
    "namespaces",
    multiple=True,
    type=KUBE_NAME,
    help="Watch this namespace (repeatable).",
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Watch every namespace.")
@click.option(
    "--selector",
    metavar="LABEL=VALUE",
    multiple=True,
    help="Only MiniClusters with this label (repeatable).",
)
@click.option(
    "--liveness",
    type=URL,
    default="http://0.0.0.0:8080/healthz",
    show_default=True,
    help="Where kopf answers liveness and readiness probes.",
)
@click.option(
    "--standalone", is_flag=True, help="No peering with other replicas (one replica only)."
)
@click.option("-v", "--verbose", is_flag=True, help="Log every step, not only what changed.")
@_interval(
    "--autoscale-interval",
    0.2,
    "Seconds at least between looks at the queue of a MiniCluster with spec.autoscale "
    "(a look waits at rank 0, over the pod network, until its queue changes, 10 s at most).",
)
@_interval(
    "--health-interval",
    5.0,
    "Seconds between looks at the health of a MiniCluster with spec.health "
    "(status.health, events Drained and Recovered).",
)
@click.option(
    "--priority",
    type=int,
    help="Peering priority: the highest live replica works (default: its start time, so the newest).",
)
def operator_command(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    selector: tuple[str, ...],
    liveness: str,
    standalone: bool,
    verbose: bool,
    autoscale_interval: float,
    health_interval: float,
    priority: int | None,
) -> int:
    """Reconcile MiniCluster resources in the cluster (kopf; replaces the Flux Operator's controller)."""
    if bool(namespaces) == all_namespaces:
        raise InputError(
            "give --namespace NS (repeatable) or --all-namespaces, not both or neither"
        )
    labels = {}
    for item in selector:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--selector {item!r}: write it as LABEL=VALUE")
        labels[key] = value
    try:
        import kopf
    except ImportError:
        raise LocalToolMissing("the operator needs kopf: pip install 'fluxhop[operator]'") from None
    from fluxhop.operator import handlers, timers
    from fluxhop.operator.peering import ensure_peering, nameable

    nameable(os.environ)
    if not standalone:
        kube = handlers.connect(namespaces[0] if namespaces else "default")  # the handlers' own
        for made in ensure_peering(kube, handlers.PEERING, namespaces):
            click.echo(f"fluxhop operator: created {made} for the replicas' peering", err=True)
    handlers.selector.update(labels)
    handlers.standalone = standalone
    handlers.own_namespace = own_namespace()
    timers.register_autoscaling(autoscale_interval)
    timers.register_health(health_interval)
    if priority is not None:
        handlers.priority = priority
    # kopf's log lines, each naming its resource ([namespace/name]): kopf's own
    # default leaves that out, and a line that says a handler failed but not for
    # which MiniCluster helps nobody
    kopf.configure(verbose=verbose, log_prefix=True)
    kopf.run(
        clusterwide=all_namespaces,
        namespaces=list(namespaces),
        liveness_endpoint=liveness,
        standalone=standalone,  # peering's name and mandate: handlers.configure
    )
    return 0
