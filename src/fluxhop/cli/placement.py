"""The placement flags of `run` and `create`: where and how the pods run on
a shared cluster. Each is the MiniCluster field a file would set
(spec/placement.py writes them in)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from fluxhop.spec.fluxsettings import VIEW_VOLUMES
from fluxhop.spec.placement import PULL_POLICIES, SECURITY_PROFILES

__all__ = ["placement_flag", "placement_options"]


def placement_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """Where the pods run on a shared cluster (spec/placement.py: each flag is
    the MiniCluster field a file would set)."""
    return [
        click.option(
            "--queue",
            metavar="NAME",
            help="Kueue LocalQueue: the Job is created suspended for Kueue to admit.",
        ),
        click.option(
            "--priority-class",
            metavar="NAME",
            help="PriorityClass of the pods (Kueue reads it too).",
        ),
        click.option(
            "--topology",
            metavar="[required:|preferred:]LEVEL",
            help="Keep the pods in one domain of the node label LEVEL (e.g. "
            "cloud.google.com/gke-nodepool): Kueue topology-aware scheduling with --queue, "
            "pod affinity otherwise; preferred by default.",
        ),
        click.option(
            "--node-selector",
            multiple=True,
            metavar="KEY=VALUE",
            help="Run only on nodes with this label (repeatable).",
        ),
        click.option(
            "--toleration",
            "tolerations",
            multiple=True,
            metavar="KEY[=VALUE]:EFFECT",
            help="Tolerate a taint (repeatable); EFFECT is NoSchedule, PreferNoSchedule or NoExecute.",
        ),
        click.option(
            "--memory", metavar="QTY", help="Memory per node (pod request and limit), e.g. 16Gi."
        ),
        click.option(
            "--cpu", metavar="QTY", help="CPU request per node, e.g. 8 (overrides what -c implies)."
        ),
        click.option(
            "--pods-per-node",
            type=int,
            metavar="N",
            help="1: one broker per node, required (exclusive nodes); N: spread evenly, "
            "at most N more on one node than on another.",
        ),
        click.option("--service-account", metavar="NAME", help="ServiceAccount of the pods."),
        click.option("--image-pull-secret", metavar="NAME", help="Secret to pull the image with."),
        click.option(
            "--pull-policy", type=click.Choice(PULL_POLICIES), help="The image's pull policy."
        ),
        click.option(
            "--security",
            type=click.Choice(SECURITY_PROFILES),
            help="Pod security profile: restricted passes the Pod Security Standards "
            "restricted level (non-root, no capabilities, seccomp RuntimeDefault).",
        ),
        click.option(
            "--metrics/--no-metrics",
            default=None,
            help="Rank 0 serves Prometheus metrics read from Flux on the port named metrics "
            "(default: on for create, off for run).",
        ),
        click.option(
            "--metrics-namespace",
            "metrics_namespaces",
            multiple=True,
            metavar="NAMESPACE",
            help="A namespace whose pods may scrape the metrics, besides the MiniCluster's own "
            "(repeatable).",
        ),
        click.option(
            "--health-check",
            "health_checks",
            multiple=True,
            metavar="NAME=COMMAND",
            help="A health check run on every node; failing, it drains the node's rank "
            "(bash; repeatable; see spec.health).",
        ),
        click.option(
            "--health-interval",
            type=int,
            metavar="SECONDS",
            help="How often each health check runs (default 60).",
        ),
        click.option(
            "--lead-state",
            metavar="emptyDir|claim,...",
            help="Where rank 0 of an interactive MiniCluster keeps the queue for its next pod "
            "(spec.leadState): emptyDir (in the pod: outlives its broker, not the pod), claim "
            "(a claim fluxhop makes), claim=NAME (yours); with class=NAME, size=QTY, "
            "checkpoint=SECONDS, joined by commas.",
        ),
        click.option(
            "--view-volume",
            type=click.Choice(VIEW_VOLUMES),
            help="How the Flux view reaches the pods (spec.flux.container.volume): image mounts "
            "its image read-only (Kubernetes >= 1.35, containerd >= 2.2), copy copies it into "
            "an emptyDir, auto (default) mounts it where every node can.",
        ),
    ]


def placement_flag(name: str) -> str:
    """The flag a placement field is typed as, read from its click option."""

    def bare() -> None: ...

    command: Any = bare
    for option in placement_options():
        command = option(command)
    return next(max(p.opts, key=len) for p in command.__click_params__ if p.name == name)
