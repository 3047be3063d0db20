"""The job flags `run` and `create` share, in Flux's spellings (-N nodes, -n
tasks, -c cores per task, -g GPUs per task), and the MiniCluster they make."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import click

from fluxhop.cli.common import load_spec, shortened, target_option
from fluxhop.cli.params import DOMAIN, FILE, KUBE_NAME
from fluxhop.cli.placement import placement_flag, placement_options
from fluxhop.errors import InputError, SpecError, clipped
from fluxhop.flux.broker import QUEUE_POLICIES
from fluxhop.flux.jobopts import JobOptions
from fluxhop.render.targets import Target
from fluxhop.spec.flags import minicluster_from_flags, parse_env
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.placement import Placement
from fluxhop.spec.screen import in_terms

__all__ = ["JOB_FLAGS", "JobFlags", "job_options", "spec_from_options"]


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
    flux_in_image: bool = False,
    placement: Placement | None = None,
    flux_words: Sequence[str] = (),
    view_image: str | None = None,
    queue_policy: str | None = None,
    sched_simple: bool = False,
) -> MiniCluster:
    """One MiniCluster from either -f FILE or the job flags (not both); the
    placement flags apply to either."""
    if filename:
        shaping = {
            "-N": nodes,
            "-n": ntasks,
            "-c": cores,
            "-g": gpus,
            "--image": image,
            "--workdir": workdir,
            "--max-size": max_size,
            "--flux-in-image": flux_in_image or None,
            "--view-image": view_image,
            "--queue-policy": queue_policy,
            "--sched-simple": sched_simple or None,
        }
        given = [flag for flag, value in shaping.items() if value is not None] + (
            ["--env"] if env else []
        )
        if command or given:
            raise InputError(
                f"-f takes the whole job from the file; drop {' '.join(given) or 'the command'}"
            )
        return load_spec(
            filename, name=name, namespace=namespace, placement=placement, flux_words=flux_words
        )
    if not image:
        raise InputError(
            "--image is required (the container image that runs the command), or use -f FILE"
        )
    if view_image and flux_in_image:
        raise InputError(
            "--view-image and --flux-in-image: the image has Flux, so no view; drop one"
        )
    if placement is not None and placement.view_volume and flux_in_image:
        raise InputError(
            "--view-volume and --flux-in-image: the image has Flux, so no view; drop one"
        )
    if queue_policy and sched_simple:
        raise InputError("--queue-policy is Fluxion's, and sched-simple has none: drop one")
    if command and placement is not None and placement.lead_state is not None:
        raise InputError(
            "--lead-state keeps an interactive MiniCluster's queue, and a command makes a batch "
            "one (its new rank 0 would run the command again): drop one"
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
            flux_in_image=flux_in_image,
            view_image=view_image,
            placement=placement,
            extra_flux_args=flux_words,
            queue_policy=queue_policy,
            simple_scheduler=sched_simple,
        )
    except InputError as err:  # the spec's, and the placement flags' own
        message = in_terms(str(err), _FLAG_OF)
        raise (shortened(err) if message == str(err) else SpecError(clipped(message))) from None


# Where a field of the MiniCluster built from flags came from, so that an error
# names the flag the user typed rather than a spec path they never wrote
# (spec.screen.in_terms; hop's flags go through the rabbit door's names).
_FLAG_OF = (
    ("spec.containers[0].image", "--image"),
    ("spec.flux.container.image", "--view-image"),
    ("spec.containers[0].workingDir", "--workdir"),
    ("spec.containers[0].environment", "--env"),
    ("spec.containers[0].resources.limits", "--gpu-resource"),
    ("spec.maxSize", "--max-size"),
    ("spec.flux.scheduler.queuePolicy", "--queue-policy"),
    ("spec.size", "-N/--nodes"),
    ("spec: pod.securityProfile", "--security"),
    ("spec.metrics.namespaces", "--metrics-namespace"),
    ("spec.containers[0].command", "COMMAND"),
    ("spec.flux.optionFlags", "--flux-args"),  # -o, -S and -t are checked before
    ("spec.leadState.claimName", "--lead-state claim"),
    ("spec.leadState.storageClassName", "--lead-state class"),
    ("spec.leadState.checkpointSeconds", "--lead-state checkpoint"),
    ("spec.leadState", "--lead-state"),
    ("metadata.name", "--name"),
)


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
    flux_in_image: bool
    view_image: str | None
    queue_policy: str | None
    sched_simple: bool
    placement: Placement
    flux_options: JobOptions

    def spec(self, namespace: str | None, *, default_image: str | None = None) -> MiniCluster:
        try:
            words = self.flux_options.words()
        except InputError as err:  # -t, --flux-args, ...: they name their flags
            raise shortened(err) from None
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
            flux_in_image=self.flux_in_image,
            view_image=self.view_image,
            placement=self.placement,
            flux_words=words,
            queue_policy=self.queue_policy,
            sched_simple=self.sched_simple,
        )

    def note_local(self) -> None:
        """Say which flags a MiniCluster on this machine ignores (it runs no pods)."""
        ignored = [placement_flag(name) for name in self.placement.pod_only()]
        if ignored:
            verb = "does" if len(ignored) == 1 else "do"
            click.echo(
                f"fluxhop: --local runs no pods: {', '.join(ignored)} {verb} not apply", err=True
            )


PLACEMENT_FLAGS = tuple(f.name for f in fields(Placement))
JOB_FLAGS = tuple(f.name for f in fields(JobFlags) if f.name not in ("placement", "flux_options"))
FLUX_OPTION_FLAGS = tuple(f.name for f in fields(JobOptions))


def flux_job_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """flux run's job options, in its spellings (flux/jobopts.py)."""
    return [
        click.option(
            "-o",
            "--setopt",
            multiple=True,
            metavar="KEY[=VAL]",
            help="Job shell option, as flux run -o (e.g. cpu-affinity=per-task, gpu-affinity=per-task).",
        ),
        click.option(
            "-S",
            "--setattr",
            multiple=True,
            metavar="KEY[=VAL]",
            help="Jobspec attribute, as flux run -S.",
        ),
        click.option(
            "-t", "--time-limit", metavar="MIN|FSD", help="Time limit (minutes, or 30s, 2h, ...)."
        ),
        click.option(
            "--exclusive", is_flag=True, help="Whole nodes for the job (flux run --exclusive)."
        ),
        click.option(
            "--flux-args",
            metavar='"ARGS"',
            help="More flux run arguments, passed on word for word.",
        ),
    ]


def pop_flux_options(kwargs: dict[str, Any]) -> JobOptions:
    return JobOptions(
        **{
            key: tuple(value) if isinstance(value, (list, tuple)) else value
            for key in FLUX_OPTION_FLAGS
            for value in [kwargs.pop(key)]
        }
    )


def slot_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """Flux's slot shape, -c and -g, for every verb that makes a job."""
    return [
        click.option("-c", "--cores-per-task", "cores", type=int, help="Cores per task."),
        click.option("-g", "--gpus-per-task", "gpus", type=int, help="GPUs per task."),
    ]


def job_options(func: Callable[..., int]) -> Callable[..., int]:
    """Add the job options; the command gets them as one ``job: JobFlags``."""
    options = [
        click.option(
            "-f", "--filename", type=FILE, help="Run a MiniCluster file instead of a command."
        ),
        click.option("-N", "--nodes", type=int, help="Number of nodes (pods, Flux brokers)."),
        click.option("-n", "--ntasks", type=int, help="Number of tasks (default: one per node)."),
        *slot_options(),
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
        click.option(
            "--flux-in-image",
            is_flag=True,
            help="The image has Flux installed: no Flux view init container.",
        ),
        click.option(
            "--view-image",
            metavar="IMAGE",
            help="The Flux view image, matching the image's OS and glibc (default: "
            "flux-view-ubuntu:tag-noble, Ubuntu 24.04; see the view image guide).",
        ),
        click.option(
            "--queue-policy",
            type=click.Choice(QUEUE_POLICIES),
            help="Fluxion's queue policy (default: easy, so that a job larger than the brokers "
            "up waits for them; fcfs fails it).",
        ),
        click.option(
            "--sched-simple",
            is_flag=True,
            help="Schedule with Flux's own sched-simple instead of Fluxion.",
        ),
        *flux_job_options(),
        *placement_options(),
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
        placement = Placement(
            **{
                key: tuple(value) if isinstance(value, (list, tuple)) else value
                for key in PLACEMENT_FLAGS
                for value in [kwargs.pop(key)]
            }
        )
        flux_options = pop_flux_options(kwargs)
        job = JobFlags(
            **{key: kwargs.pop(key) for key in JOB_FLAGS},
            placement=placement,
            flux_options=flux_options,
        )
        return func(job=job, **kwargs)

    wrapped: Callable[..., int] = with_job
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped
