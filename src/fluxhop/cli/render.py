"""``fluxhop render``: a MiniCluster file in, Kubernetes objects out."""

from __future__ import annotations

import click

from fluxhop.cli.common import echo_objects, load_spec, output_option, target_option
from fluxhop.cli.params import DOMAIN, FILE, KUBE_NAME
from fluxhop.render import render
from fluxhop.render.targets import Target


@click.command("render")
@click.option(
    "-f", "--filename", type=FILE, required=True, help="MiniCluster YAML file, or - for stdin."
)
@target_option()
@output_option("-o", "--output")
@click.option("--name", type=KUBE_NAME, help="Override metadata.name.")
@click.option("--namespace", type=KUBE_NAME, help="Override metadata.namespace.")
@click.option(
    "--cluster-domain",
    type=DOMAIN,
    default="cluster.local",
    show_default=True,
    help="The cluster's DNS domain.",
)
def render_command(
    filename: str,
    target: Target,
    output: str,
    name: str | None,
    namespace: str | None,
    cluster_domain: str,
) -> int:
    """Print the objects that run a MiniCluster (kubectl apply -f - ready)."""
    spec = load_spec(filename, name=name, namespace=namespace)
    echo_objects(render(spec, target, cluster_domain=cluster_domain), output)
    return 0
