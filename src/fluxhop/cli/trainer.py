"""``fluxhop trainer render|run``: Kubeflow Trainer TrainJobs on Flux runtimes,
without the Trainer controller (the JobSet its Flux plugin would build)."""

from __future__ import annotations

from typing import Any

import click

from fluxhop.cli.common import echo_objects, output_option
from fluxhop.cli.kubeopts import connect, kube_options
from fluxhop.cli.params import DOMAIN, FILE, Seconds
from fluxhop.cli.session import run_root
from fluxhop.documents import read_input
from fluxhop.errors import InputError
from fluxhop.trainer import TrainerError, build
from fluxhop.trainer.documents import pick
from fluxhop.trainer.jobset import FLUX_ROOT, PATHS
from fluxhop.trainer.plan import NODE, POLICIES
from fluxhop.workload import mark_root


def marked_objects(
    trainjob: dict[str, Any], runtime: dict[str, Any], cluster_domain: str
) -> list[dict[str, Any]]:
    """The plugin's objects, with the JobSet marked as fluxhop's root: where its
    pods keep Flux and the ConfigMap (/etc/flux-config), and its lead container."""
    objects = _objects(trainjob, runtime, cluster_domain)
    node = next(j for j in objects[-1]["spec"]["replicatedJobs"] if j["name"] == NODE)
    return mark_root(
        objects,
        "jobset",
        max_size=node["template"]["spec"]["parallelism"],
        flux_root=FLUX_ROOT,
        config_dir=PATHS.config_dir,
        container=NODE,
    )


def _read(path: str) -> tuple[str, str]:
    return path, read_input(path)


def _inputs(filename: str, runtimes: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    return pick([_read(filename), *(_read(path) for path in runtimes)])


def _objects(
    trainjob: dict[str, Any], runtime: dict[str, Any], cluster_domain: str
) -> list[dict[str, Any]]:
    objects = build(trainjob, runtime, cluster_domain=cluster_domain)
    if objects is None:
        policy = (runtime.get("spec") or {}).get("mlPolicy") or {}
        uses = next((name for name in POLICIES if policy.get(name) is not None), "no")
        raise TrainerError(
            f"runtime {runtime['metadata'].get('name')} has {uses} ML policy, not flux; "
            "fluxhop runs TrainJobs whose runtime sets spec.mlPolicy.flux"
        )
    return objects


@click.group("trainer")
def trainer() -> None:
    """Kubeflow Trainer TrainJobs whose runtime has a flux ML policy."""


def _input_options(func: Any) -> Any:
    func = click.option(
        "--runtime",
        "runtimes",
        multiple=True,
        type=FILE,
        metavar="FILE",
        help="File with the (Cluster)TrainingRuntime (repeatable; may also be in -f).",
    )(func)
    func = click.option(
        "-f", "--filename", type=FILE, required=True, help="The TrainJob YAML ('-' for stdin)."
    )(func)
    return click.option(
        "--cluster-domain",
        type=DOMAIN,
        default="cluster.local",
        show_default=True,
        help="The cluster's DNS domain.",
    )(func)


@trainer.command("render")
@_input_options
@output_option("-o", "--output")
def render_command(filename, runtimes, cluster_domain, output) -> int:  # type: ignore[no-untyped-def]
    """Print the ConfigMap, Secret and JobSet for a TrainJob."""
    trainjob, runtime = _inputs(filename, runtimes)
    echo_objects(_objects(trainjob, runtime, cluster_domain), output)
    return 0


@trainer.command("run")
@_input_options
@kube_options(short_namespace=False)
@click.option("--keep", is_flag=True, help="Leave the JobSet in place when the job ends.")
@click.option(
    "--timeout", type=Seconds(0), default=600, show_default=True, help="Seconds to wait for rank 0."
)
def run_command(
    filename, runtimes, cluster_domain, kubeconfig, context, namespace, keep, timeout
) -> int:  # type: ignore[no-untyped-def]
    """Apply a TrainJob's JobSet, stream rank 0, exit with the job's exit code."""
    trainjob, runtime = _inputs(filename, runtimes)
    meta = trainjob.setdefault("metadata", {})
    ops = connect(kubeconfig, context, namespace or meta.get("namespace"))
    meta["namespace"] = ops.kube.namespace
    objects = marked_objects(trainjob, runtime, cluster_domain)
    jobset = objects[-1]
    if jobset["spec"].get("suspend"):
        raise InputError(
            f"TrainJob {jobset['metadata']['name']} is suspended (spec.suspend: true), and "
            "trainer run would wait for whoever resumes it; set it to false, or give the "
            "TrainJob to the Trainer controller"
        )
    node = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == NODE)
    container = next(
        c for c in node["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == NODE
    )
    return run_root(
        jobset["metadata"]["name"],
        lambda: ops.apply_objects(objects, "jobset"),
        ops,
        interactive="args" not in container,
        keep=keep,
        timeout=timeout,
    )
