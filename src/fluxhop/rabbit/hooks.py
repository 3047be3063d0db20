"""The DWS lifecycle hooks a rabbit-aware Flux module calls.

``on_setup`` runs when a job's Workflow goes to Setup and checks the
MiniCluster the job asked for (request, policy, placement) without making
anything; ``on_pre_run`` runs once NNF has mounted the job's file systems
(PreRun ready), reads where (fluxhop.rabbit.storage) and creates the
MiniCluster mounting them, returning once it is up; ``on_post_run`` gives
rank 0's exit code, keeps the tail of its log for the job and deletes the
MiniCluster, returning once its pods are gone (NNF then unmounts what they
mounted); ``on_teardown`` does the same for anything PostRun left.

All are plain functions (no Flux handle, no globals) that are safe to call
twice: a retried pre-run re-applies the same objects (placement is
deterministic, the CURVE key is kept), and a second teardown finds nothing to
do. The MiniCluster's root object is owned by the Workflow, so even a crash
between the two leaves nothing behind: deleting the Workflow collects it.
Errors are :class:`~fluxhop.errors.FluxhopError` with one-line messages, for
the caller to raise as a job exception.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import ClusterError, NotOurs, WaitTimeout
from fluxhop.flux.jobspec import Jobspec
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.nnf import read_nnf
from fluxhop.rabbit.policy import Owner, Policy
from fluxhop.rabbit.request import CXI_RESOURCE, RabbitRequest
from fluxhop.rabbit.storage import MOUNT_ROOT, RabbitVolume, reserved
from fluxhop.rabbit.workflow import Workflow
from fluxhop.workload.root import Root
from fluxhop.workload.status import completion_index

if TYPE_CHECKING:
    from fluxhop.client import Client
    from fluxhop.spec.minicluster import MiniCluster

__all__ = ["LOG_LIMIT", "on_post_run", "on_pre_run", "on_setup", "on_teardown", "tail"]

LOG_LIMIT = 50_000  # characters of rank 0's log kept for the job
PODS_GONE_TIMEOUT = 90.0  # seconds for a deleted MiniCluster's pods to stop
log = logging.getLogger("fluxhop.rabbit")


def _workflow(workflow: Workflow | Mapping[str, Any]) -> Workflow:
    return workflow if isinstance(workflow, Workflow) else Workflow.from_object(workflow)


def _ops(client: Client, namespace: str) -> MiniClusters:
    """The client's cluster operations, in the Workflow's namespace (owner
    references cannot cross namespaces)."""
    return MiniClusters(client.ops.kube.in_namespace(namespace))


def _checked(
    jobspec: Jobspec | Mapping[str, Any], flow: Workflow, owner: Owner | int, policy: Policy | None
) -> tuple[RabbitRequest, Owner] | None:
    """The job's request and owner, checked against the site's policy and
    the Workflow's user and group; None when the job asked for no MiniCluster."""
    request = RabbitRequest.from_jobspec(jobspec)
    if not request.enabled:
        return None
    owner = owner if isinstance(owner, Owner) else Owner.lookup(owner)
    (policy or Policy()).check(owner)
    problem = flow.owner_problem(owner.uid, owner.gid)
    if problem:
        raise RabbitError(problem)
    return request, owner


def _spec(
    request: RabbitRequest,
    flow: Workflow,
    rabbits: Iterable[str],
    owner: Owner,
    cxi_resource: str | None,
    storage: Sequence[RabbitVolume] = (),
    client: Client | None = None,
) -> MiniCluster:
    """The MiniCluster, as ``client`` would make it (its target and
    cluster domain; the defaults before there is one)."""
    site = (
        {} if client is None else {"target": client.target, "cluster_domain": client.cluster_domain}
    )
    return request.to_minicluster(
        rabbits,
        name=flow.name,
        namespace=flow.namespace,
        uid=owner.uid,
        gid=owner.gid,
        workflow=flow,
        storage=storage,
        cxi_resource=cxi_resource,
        **site,
    )


def _undo(ops: MiniClusters, root: Root, why: str) -> NoReturn:
    """Delete what PreRun made and say why, in one line (a failed delete too)."""
    try:
        ops.delete_root(root)
    except ClusterError as err:
        raise RabbitError(f"{why}; deleting it failed too: {err}") from None
    raise RabbitError(f"{why}; the MiniCluster is deleted")


def on_setup(
    jobspec: Jobspec | Mapping[str, Any],
    workflow: Workflow | Mapping[str, Any],
    rabbits: Iterable[str],
    owner: Owner | int,
    *,
    policy: Policy | None = None,
    cxi_resource: str | None = CXI_RESOURCE,
) -> str | None:
    """Check the MiniCluster a job asked for with ``rabbit.mpi`` (its
    request, the user policy and the Workflow's user and group, its
    placement on ``rabbits``) and make nothing.

    Returns the name it will have, or None when the job asked for none.
    """
    flow = _workflow(workflow)
    checked = _checked(jobspec, flow, owner, policy)
    if checked is None:
        return None
    return _spec(checked[0], flow, rabbits, checked[1], cxi_resource, reserved(flow)).name


def on_pre_run(
    jobspec: Jobspec | Mapping[str, Any],
    workflow: Workflow | Mapping[str, Any],
    rabbits: Iterable[str],
    owner: Owner | int,
    client: Client,
    *,
    policy: Policy | None = None,
    cxi_resource: str | None = CXI_RESOURCE,
    mount_root: str = MOUNT_ROOT,
) -> str | None:
    """Create the MiniCluster a job asked for with ``rabbit.mpi``, mounting
    the Workflow's file systems where NNF mounted them (its NnfContainerData,
    or its file systems' NnfAccess; paths under ``mount_root`` only), and
    return once its Flux instance is up (rank 0's pod Ready: every broker
    joined), within the container profile's ``preRunTimeoutSeconds`` (past
    it, the MiniCluster is deleted and the error says why it did not come up).

    Returns its name, or None when the job asked for none. ``rabbits`` are
    the rabbit nodes serving the job's compute nodes; ``owner`` is the job
    owner (an :class:`Owner`, or a uid looked up on this host).
    """
    flow = _workflow(workflow)
    checked = _checked(jobspec, flow, owner, policy)
    if checked is None:
        return None
    request, who = checked
    # all checked before a request
    _spec(request, flow, rabbits, who, cxi_resource, reserved(flow), client)
    ops = _ops(client, flow.namespace)
    view = read_nnf(ops.kube, flow, who.uid, who.gid, mount_root)
    spec = _spec(request, flow, rabbits, who, cxi_resource, view.storage, client)
    root = ops.create(
        spec, client.target, cluster_domain=client.cluster_domain, owners=[flow.owner_reference]
    )
    log.info("created rabbit MiniCluster %s/%s for %s", flow.namespace, flow.name, who.describe())
    try:
        progress = ops.wait_instance_up(root, timeout=view.pre_run_timeout)
    except WaitTimeout as err:
        _undo(ops, root, f"{err} (the container profile's preRunTimeoutSeconds)")
    workers_failed = [
        pod for pod in progress.pods.values()
        if pod.get("status", {}).get("phase") == "Failed" and completion_index(pod) != 0
    ]  # fmt: skip
    if workers_failed:  # rank 0's own end is the job's, for PostRun to report
        why = ops.failure(root) or progress.summary()
        _undo(ops, root, f"MiniCluster {root.name} failed as it came up: {why}")
    return spec.name


def tail(lines: Iterable[str], limit: int = LOG_LIMIT) -> str:
    """The last ``limit`` characters of a stream, holding little more than that."""
    kept: deque[str] = deque()
    size = 0
    for line in lines:
        kept.append(line)
        size += len(line)
        while kept and size - len(kept[0]) >= limit:
            size -= len(kept.popleft())
    return "".join(kept)[-limit:]


def _ours(ops: MiniClusters, flow: Workflow, client: Client) -> Root | None:
    """The MiniCluster this Workflow's PreRun made (one GET, as the client's
    target), or None: none there, or one not made for this Workflow (left
    alone, with a warning)."""
    try:
        root = ops.find(flow.name, targets=(client.target,))
    except NotOurs as err:
        log.warning("rabbit MiniCluster %s: %s", flow.name, err)
        return None
    if root is None:
        return None
    references = root.obj["metadata"].get("ownerReferences") or []
    if not any(r.get("kind") == "Workflow" and r.get("uid") == flow.uid for r in references):
        log.warning(
            "rabbit MiniCluster %s was not created for this Workflow; leaving it alone", flow.name
        )
        return None
    return root


def _keep_log_and_delete(ops: MiniClusters, root: Root, save_log: Callable[[str], None]) -> None:
    """The tail of rank 0's log to ``save_log``, then the MiniCluster
    deleted, even when reading or saving the log fails."""
    try:
        try:
            text = tail(ops.logs(root))
        except ClusterError as err:
            log.warning("no log kept for rabbit MiniCluster %s: %s", root.name, err)
        else:
            save_log(text)
    finally:
        ops.delete_root(root)
    # NNF unmounts the file systems once the hook returns: no pod may still
    # hold them (a broker stops within its grace period, 30 s by default)
    ops.wait_pods_gone(root, timeout=PODS_GONE_TIMEOUT)
    log.info("deleted rabbit MiniCluster %s/%s", ops.kube.namespace, root.name)


def on_post_run(
    workflow: Workflow | Mapping[str, Any],
    client: Client,
    save_log: Callable[[str], None],
) -> int | None:
    """The job is over: rank 0's exit code, the tail of its log kept
    (``save_log``), and the MiniCluster deleted, all of it before NNF
    unmounts the file systems: call it once the job has ended, before the
    Workflow is asked for PostRun (NNF unmounts at PostRun what no
    container directive keeps to Teardown). None when rank 0 had not ended
    (an interactive MiniCluster) or there was no MiniCluster of this Workflow."""
    flow = _workflow(workflow)
    ops = _ops(client, flow.namespace)
    root = _ours(ops, flow, client)
    if root is None:
        return None
    try:
        return ops.status(root).exit_code
    finally:
        _keep_log_and_delete(ops, root, save_log)


def on_teardown(
    workflow: Workflow | Mapping[str, Any],
    client: Client,
    save_log: Callable[[str], None],
) -> bool:
    """Keep the tail of rank 0's log (``save_log``) and delete the MiniCluster.

    Returns whether there was a MiniCluster of this Workflow to tear down.
    The delete happens even when reading or saving the log fails.
    """
    flow = _workflow(workflow)
    ops = _ops(client, flow.namespace)
    root = _ours(ops, flow, client)
    if root is None:
        return False
    _keep_log_and_delete(ops, root, save_log)
    return True
