"""``fluxhop run``: create a MiniCluster, run a command in it, clean up.

Flux's flags shape the job (-N nodes, -n tasks, -c cores per task, -g GPUs
per task); Kubernetes targeting is long-only (--namespace, --context).
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import click

from fluxhop.cli.common import echo_objects, load_spec, output_option, target_option
from fluxhop.cli.kubeopts import connect, kube_options
from fluxhop.cli.params import DOMAIN, KUBE_NAME
from fluxhop.cli.progress import ProgressDisplay
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InputError, KubeconfigError, SpecError, interrupt_status
from fluxhop.local.backend import LocalMiniClusters
from fluxhop.render import render
from fluxhop.render.targets import Target
from fluxhop.spec.flags import minicluster_from_flags, parse_env
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.workload import Root

RUN_SETTINGS = {"allow_interspersed_args": False}
LOCAL_IMAGE = "local"  # --local runs no container; the spec still names an image
LOCAL_JOIN_TIMEOUT = 60.0  # brokers on one host join in seconds; --timeout can lower it


def spec_from_options(
    filename: str | None,
    command: Sequence[str],
    *,
    nodes: int | None,
    ntasks: int | None,
    cores: int | None,
    gpus: int | None,
    image: str | None,
    workdir: str | None,
    env: Sequence[str],
    name: str | None,
    namespace: str | None,
    max_size: int | None,
    gpu_resource: str,
) -> MiniCluster:
    """One MiniCluster from either -f FILE or the job flags (not both)."""
    if filename:
        shaping = {
            "-N": nodes,
            "-n": ntasks,
            "-c": cores,
            "-g": gpus,
            "--image": image,
            "--workdir": workdir,
            "--max-size": max_size,
        }
        given = [flag for flag, value in shaping.items() if value is not None] + (
            ["--env"] if env else []
        )
        if command or given:
            raise InputError(
                f"-f takes the whole job from the file; drop {' '.join(given) or 'the command'}"
            )
        return load_spec(filename, name=name, namespace=namespace)
    if not image:
        raise InputError(
            "--image is required (the container image that runs the command), or use -f FILE"
        )
    try:
        return minicluster_from_flags(
            list(command),
            image=image,
            nodes=1 if nodes is None else nodes,
            tasks=ntasks,
            cores_per_task=cores,
            gpus_per_task=gpus,
            gpu_resource=gpu_resource,
            workdir=workdir,
            env=parse_env(env),
            name=name,
            namespace=namespace or "default",
            max_size=max_size,
        )
    except SpecError as err:
        raise SpecError(_in_flag_terms(str(err))) from None


# Where a field of the MiniCluster built from flags came from, so that an error
# names the flag the user typed rather than a spec path they never wrote.
_FLAG_OF = (
    ("spec.containers[0].image", "--image"),
    ("spec.containers[0].workingDir", "--workdir"),
    ("spec.containers[0].environment", "--env"),
    ("spec.containers[0].resources.limits", "--gpu-resource"),
    ("spec.maxSize", "--max-size"),
    ("spec.size", "-N/--nodes"),
)


def _in_flag_terms(message: str) -> str:
    for path, flag in _FLAG_OF:
        if message.startswith(path):
            return flag + message[len(path) :]
    return message


@dataclass(frozen=True)
class JobFlags:
    """The job-shaping options that run and create share (see job_options)."""

    filename: str | None
    command: tuple[str, ...]
    nodes: int | None
    ntasks: int | None
    cores: int | None
    gpus: int | None
    image: str | None
    workdir: str | None
    env: tuple[str, ...]
    name: str | None
    max_size: int | None
    gpu_resource: str
    target: Target
    cluster_domain: str

    def spec(self, namespace: str | None, *, default_image: str | None = None) -> MiniCluster:
        return spec_from_options(
            self.filename,
            self.command,
            nodes=self.nodes,
            ntasks=self.ntasks,
            cores=self.cores,
            gpus=self.gpus,
            image=self.image or (None if self.filename else default_image),
            workdir=self.workdir,
            env=self.env,
            name=self.name,
            namespace=namespace,
            max_size=self.max_size,
            gpu_resource=self.gpu_resource,
        )


JOB_FLAGS = tuple(f.name for f in fields(JobFlags))


def job_options(func: Callable[..., int]) -> Callable[..., int]:
    """Add the job options; the command gets them as one ``job: JobFlags``."""
    options = [
        click.option("-f", "--filename", help="Run a MiniCluster file instead of a command."),
        click.option("-N", "--nodes", type=int, help="Number of nodes (pods, Flux brokers)."),
        click.option("-n", "--ntasks", type=int, help="Number of tasks (default: one per node)."),
        click.option("-c", "--cores-per-task", "cores", type=int, help="Cores per task."),
        click.option("-g", "--gpus-per-task", "gpus", type=int, help="GPUs per task."),
        click.option("--image", help="Container image that runs the command."),
        click.option("--workdir", help="Working directory of the command."),
        click.option(
            "--env", multiple=True, metavar="KEY=VALUE", help="Environment variable (repeatable)."
        ),
        click.option(
            "--name", type=KUBE_NAME, help="MiniCluster name (default: a random adjective-noun)."
        ),
        click.option("--max-size", type=int, help="Allow scaling up to this many nodes."),
        click.option(
            "--gpu-resource",
            default="nvidia.com/gpu",
            show_default=True,
            help="Extended resource name of the GPUs.",
        ),
        target_option(),
        click.option(
            "--cluster-domain",
            type=DOMAIN,
            default="cluster.local",
            show_default=True,
            help="The cluster's DNS domain.",
        ),
        click.argument("command", nargs=-1, type=click.UNPROCESSED),
    ]

    @functools.wraps(func)
    def with_job(**kwargs: Any) -> int:
        job = JobFlags(**{key: kwargs.pop(key) for key in JOB_FLAGS})
        return func(job=job, **kwargs)

    wrapped: Callable[..., int] = with_job
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


@click.command("run", context_settings=RUN_SETTINGS)
@job_options
@kube_options(short_namespace=False)
@click.option("--dry-run", is_flag=True, help="Print the objects instead of creating them.")
@output_option("--output")
@click.option("--keep", is_flag=True, help="Leave the MiniCluster in place when the job ends.")
@click.option(
    "--timeout",
    type=float,
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
    if local:
        return run_local(spec, timeout=timeout, verbose=verbose)
    try:
        ops = connect(kubeconfig, context, namespace)
    except KubeconfigError:
        if kubeconfig or context or not shutil.which("flux"):
            raise
        click.echo(
            "fluxhop: no Kubernetes configuration; running on this machine with the flux on PATH "
            "(--local)",
            err=True,
        )
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


def run_root(
    name: str,
    create: Callable[[], Root],
    ops: MiniClusters,
    *,
    interactive: bool,
    keep: bool,
    timeout: float,
) -> int:
    """Run ``create``, then stream rank 0 and return its exit code (or, when
    ``interactive``, wait until the pods run); delete unless ``keep``."""
    root = None
    with ProgressDisplay(name) as display:
        try:
            root = create()
            if interactive:
                ops.wait_ready(root, timeout=timeout, on_progress=display.update)
                display.note(
                    f"interactive MiniCluster {root.name} is up: fluxhop shell {root.name} "
                    f"(or fluxhop proxy {root.name}); fluxhop delete {root.name} when done"
                )
                keep = True
                return 0
            lead = ops.wait_lead_started(root, timeout=timeout, on_progress=display.update)
            display.stop()
            for line in ops.kube.log(lead["metadata"]["name"], root.container, follow=True):
                sys.stdout.write(line)
                sys.stdout.flush()
            return ops.wait_exit(root)
        except KeyboardInterrupt as err:
            display.note("interrupted" + ("" if keep else "; deleting the MiniCluster"))
            return interrupt_status(err)
        finally:
            if root is not None and not keep:
                ops.delete_root(root)
