"""``fluxhop hop`` (and ``flux hop``): a MiniCluster on rabbit nodes from flags.

The flags are the ``rabbit.mpi.*`` attributes a Flux job would carry; they go
through the same parser as a jobspec, so ``flux hop`` and a job's
``-S rabbit.mpi.*`` always mean the same thing.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import click

from fluxhop.cli.common import echo_objects, output_option, shortened, target_option
from fluxhop.cli.kubeopts import connect, kube_options
from fluxhop.cli.params import ABSOLUTE, DOMAIN, KUBE_NAME
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InputError, clipped
from fluxhop.rabbit.nnf import read_nnf
from fluxhop.rabbit.request import CXI_RESOURCE, DEFAULT_IMAGE, KEYS, RabbitRequest
from fluxhop.rabbit.storage import MOUNT_ROOT, RabbitVolume
from fluxhop.rabbit.workflow import Workflow
from fluxhop.render import render
from fluxhop.spec.flags import parse_env
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.names import random_name
from fluxhop.spec.screen import in_terms


def request_from_flags(
    *,
    image: str,
    command: str | None,
    workdir: str | None,
    tasks: int | None,
    nodes: int | None,
    rabbits: str,
    add_flux: bool | None,
    succeed: bool,
    exclusive: bool,
    env: tuple[str, ...],
    pull_policy: str | None,
    pull_secret: str | None,
) -> RabbitRequest:
    """The request a job with the same ``-S rabbit.mpi.*`` attributes makes."""
    given: dict[str, Any] = {
        "image": image,
        "command": command,
        "workdir": workdir,
        "tasks": tasks,
        "nodes": nodes,
        "rabbits": rabbits,
        "add_flux": add_flux,
        "succeed": succeed or None,
        "exclusive": exclusive or None,
        "env": parse_env(env) or None,
        "pull_policy": pull_policy,
        "pull_secret": pull_secret,
    }
    mpi = {key: value for key, value in given.items() if value is not None}
    return RabbitRequest.from_jobspec({"attributes": {"system": {"rabbit": {"mpi": mpi}}}})


def _flag_names() -> list[tuple[str, str]]:
    """The flag for each name the rabbit door's errors use: ``rabbit.mpi.KEY``
    is the flag of the same name (the flags are the attributes), and the
    builder's ``name`` and ``cxi_resource`` are --name and --cxi-resource."""
    flags = {p.name: "/".join(p.opts) for p in hop_command.params if isinstance(p, click.Option)}
    names = [(f"rabbit.mpi.{key}", flags[key]) for key in KEYS if key in flags]
    return [*names, ("cxi_resource", flags["cxi_resource"]), ("name", flags["name"])]


@contextlib.contextmanager
def _in_flag_terms() -> Iterator[None]:
    """Errors and warnings of the rabbit door, in the words of hop's flags."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                caught.extend(record)
    except InputError as err:
        message = in_terms(str(err), _flag_names())
        raise (shortened(err) if message == str(err) else InputError(clipped(message))) from None
    finally:
        for warning in caught:  # out again, under the flags' names
            text = in_terms(str(warning.message), _flag_names())
            warnings.warn(text, warning.category, stacklevel=3)


def _workflow_storage(
    ops: MiniClusters, name: str, mount_root: str
) -> tuple[Workflow, list[RabbitVolume]]:
    """The Workflow and its file systems where NNF mounted them, read as
    the PreRun hook reads them: an à-la-carte MiniCluster gets the same mounts."""
    found = ops.kube.get("Workflow", name)
    if found is None:
        raise InputError(
            f"--workflow {name}: no such Workflow in namespace {ops.kube.namespace} "
            "(kubectl get workflows -A finds it)"
        )
    flow = Workflow.from_object(found)
    problem = flow.owner_problem(os.getuid(), os.getgid())
    if problem:
        raise InputError(f"--workflow {name}: {problem}")
    return flow, read_nnf(ops.kube, flow, os.getuid(), os.getgid(), mount_root).storage


def summary(spec: MiniCluster, request: RabbitRequest) -> str:
    lead = spec.spec.flux_container
    rows = {
        "name": f"{spec.namespace}/{spec.name}",
        "image": lead.image,
        "command": " ".join(lead.command or []) or "(interactive)",
        "workdir": lead.working_dir or "(the image's)",
        "rabbits": ",".join(spec.spec.pod.node_affinity.get("kubernetes.io/hostname", [])),
        "nodes": str(spec.spec.size),
        "tasks": str(spec.spec.ntasks),
        "flux view": "no (the image has Flux)" if spec.spec.flux.container.disable else "added",
        "always succeed": "yes" if request.succeed else "no",
        "environment": ", ".join(f"{k}={v}" for k, v in lead.environment.items()) or "-",
    }
    width = max(len(key) for key in rows)
    return "".join(f"{key.rjust(width)}: {value}\n" for key, value in rows.items())


@click.command("hop")
@click.option("--image", default=DEFAULT_IMAGE, show_default=True, help="Container image.")
@click.option("--command", help="Command to run (default: an interactive MiniCluster).")
@click.option("--workdir", help="Working directory of the command.")
@click.option("--tasks", type=int, help="Total MPI tasks (default: one per node).")
@click.option("--nodes", type=int, help="Number of rabbits to use (default: all of --rabbits).")
@click.option("--rabbits", required=True, metavar="A,B,...", help="Rabbit node names to run on.")
@click.option(
    "--add-flux/--no-add-flux",
    default=None,
    help="Add the Flux view (default: only for images other than the default, which has Flux).",
)
@click.option("--succeed", is_flag=True, help="Label the job always-succeed.")
@click.option("--exclusive", is_flag=True, help="Run the command with --exclusive.")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment (repeatable).")
@click.option(
    "--pull-policy",
    type=click.Choice(["Always", "IfNotPresent", "Never"]),
    help="The image's pull policy (default: the cluster's).",
)
@click.option("--pull-secret", help="Name of an existing image pull Secret.")
@click.option("--name", type=KUBE_NAME, help="MiniCluster name (default: a random adjective-noun).")
@click.option(
    "--workflow",
    type=KUBE_NAME,
    help="A DWS Workflow whose file systems to mount, where NNF mounted them (in --namespace).",
)
@click.option(
    "--nnf-mount-root",
    type=ABSOLUTE,
    default=MOUNT_ROOT,
    show_default=True,
    help="Where NNF mounts file systems on the rabbits (its SERVER_MOUNT_PREFIX), for --workflow.",
)
@click.option(
    "--cxi-resource",
    default=CXI_RESOURCE,
    show_default=True,
    help="Device plugin resource of the Slingshot NIC.",
)
@target_option()
@click.option(
    "--cluster-domain",
    type=DOMAIN,
    default="cluster.local",
    show_default=True,
    help="The cluster's DNS domain.",
)
@kube_options(short_namespace=False)
@click.option("--dry-run", is_flag=True, help="Print the objects instead of creating them.")
@output_option("--output")
def hop_command(
    image,
    command,
    workdir,
    tasks,
    nodes,
    rabbits,
    add_flux,
    succeed,
    exclusive,
    env,
    pull_policy,
    pull_secret,
    name,
    workflow,
    nnf_mount_root,
    cxi_resource,
    target,
    cluster_domain,
    kubeconfig,
    context,
    namespace,
    dry_run,
    output,
) -> int:  # type: ignore[no-untyped-def]
    """Create a MiniCluster on rabbit nodes, as a job's -S rabbit.mpi.* would.

    Example: flux hop --rabbits r1,r2 --image IMG --command "lmp -in in.reaxff"
    """
    with _in_flag_terms():
        request = request_from_flags(
            image=image,
            command=command,
            workdir=workdir,
            tasks=tasks,
            nodes=nodes,
            rabbits=rabbits,
            add_flux=add_flux,
            succeed=succeed,
            exclusive=exclusive,
            env=env,
            pull_policy=pull_policy,
            pull_secret=pull_secret,
        )
    if workflow:  # every flag checked before the cluster is asked for the Workflow
        with _in_flag_terms():
            request.to_minicluster(request.rabbits or (), name=name or random_name(),
                                   namespace=namespace or "default", uid=os.getuid(),
                                   gid=os.getgid(), cxi_resource=cxi_resource)  # fmt: skip
    ops = connect(kubeconfig, context, namespace) if workflow else None
    flow, storage = _workflow_storage(ops, workflow, nnf_mount_root) if ops else (None, [])
    with _in_flag_terms():
        spec = request.to_minicluster(
            request.rabbits or (),
            name=name or random_name(),
            namespace=namespace or (flow.namespace if flow else "default"),
            uid=os.getuid(),
            gid=os.getgid(),
            workflow=flow,
            storage=storage,
            cxi_resource=cxi_resource,
            target=target,
            cluster_domain=cluster_domain,
        )
    if dry_run:
        echo_objects(render(spec, target, cluster_domain=cluster_domain), output)
        return 0
    ops = ops or connect(kubeconfig, context, namespace)
    root = ops.create(spec, target, cluster_domain=cluster_domain)
    click.echo(summary(spec, request), nl=False)
    click.echo(
        f"minicluster/{root.name} created ({root.target}, namespace {ops.kube.namespace}); "
        f"fluxhop shell {root.name} to use it, fluxhop delete {root.name} when done",
        err=True,
    )
    return 0
