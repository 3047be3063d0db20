"""What NNF wrote for a Workflow, read from the cluster at PreRun: the
pinned container profile of its ``#DW container`` directive (the copy NNF
makes of it at Proposal, ``<workflow>-<i>``), and where NNF mounted its
file systems: that directive's NnfContainerData (the profile must say
``createContainer: false``: otherwise NNF starts pods of its own), else each
file system's ``<workflow>-<i>-servers`` NnfAccess; and, for GFS2, the
computes' ClientMounts. A few GETs and one label-selected list per
Workflow, whatever the number of Workflows.

What it reads needs ``get`` on NnfContainerProfile, NnfContainerData and
NnfAccess in the Workflow's namespace and ``list`` on ClientMount in every
namespace (without it, the directory map is left out with a warning); for
a global Lustre file system (``DW_GLOBAL_``), ``list`` on LustreFileSystem
in every namespace."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopWarning, Forbidden, NotInstalled, shown
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.storage import (
    MOUNT_ROOT,
    RabbitVolume,
    from_accesses,
    from_container_data,
    from_lustre,
    global_names,
    index_directories,
)
from fluxhop.rabbit.workflow import Workflow

__all__ = ["PRE_RUN_TIMEOUT", "NnfView", "read_nnf"]

PRE_RUN_TIMEOUT = 300  # NnfContainerProfile data.preRunTimeoutSeconds' default
# Past this a limit is none (100 years; the field is an int64 that a
# timer of this platform cannot hold)
LONGEST_TIMEOUT = 100 * 365 * 24 * 3600


@dataclass(frozen=True)
class NnfView:
    storage: list[RabbitVolume]
    profile: dict[str, Any] | None  # the pinned container profile's data, if any
    pre_run_timeout: float | None  # seconds for the MiniCluster to come up (None: no limit)


def _timeout(profile: dict[str, Any] | None, name: str = "") -> float | None:
    value = (profile or {}).get("preRunTimeoutSeconds", PRE_RUN_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RabbitError(
            f"NnfContainerProfile {name} data.preRunTimeoutSeconds {value!r} is not a whole "
            "number of seconds, 0 or more"
        )
    return None if value == 0 or value > LONGEST_TIMEOUT else float(value)  # 0: NNF's "no limit"


def _profile_problem(
    flow: Workflow, uid: int, gid: int, profile: dict[str, Any], name: str
) -> str | None:
    """NNF's rule: a profile that names a userID/groupID is that user's or group's only."""
    for key, mine in (("userID", uid), ("groupID", gid)):
        theirs = profile.get(key)
        if theirs is not None and theirs != mine:
            return f"container profile {name} is for {key} {theirs} only, and the job's is {mine}"
    return None


WORKFLOW_LABELS = ("dataworkflowservices.github.io/workflow.name",
                   "dataworkflowservices.github.io/workflow.namespace")  # fmt: skip
INDEXED = ("gfs2",)  # mounted on a rabbit as a directory per compute (XFS is never mounted here)


def _with_directories(
    kube: Kube, flow: Workflow, storage: list[RabbitVolume]
) -> list[RabbitVolume]:
    """Each GFS2/XFS volume with its computes' directories, from the
    ClientMounts NNF made for the Workflow (one list, all namespaces)."""
    indexed = {i for i, _ in enumerate(flow.directives)
               if flow.arguments(i)[0] == "jobdw" and flow.arguments(i)[1].get("type") in INDEXED}  # fmt: skip
    if not any(v.directive_index in indexed for v in storage):
        return storage
    labels = dict(zip(WORKFLOW_LABELS, (flow.name, flow.namespace), strict=True))
    try:
        mounts = kube.list("ClientMount", labels=labels, all_namespaces=True)
    except Forbidden as err:
        warnings.warn(
            f"no DW_JOB_<name>_DIRECTORIES for Workflow {flow.name}: listing ClientMounts in "
            f"every namespace is not allowed ({err})",
            FluxhopWarning,
            stacklevel=3,
        )
        return storage
    return [
        dataclasses.replace(v, directories=tuple(index_directories(mounts, flow, v.directive_index).items()))
        if v.directive_index in indexed else v
        for v in storage
    ]  # fmt: skip


def _lustres(kube: Kube, directive: str) -> list[dict[str, Any]]:
    """Every LustreFileSystem (one list, all namespaces), for the global
    Lustre file systems ``directive`` names."""
    try:
        return kube.list("LustreFileSystem", all_namespaces=True)
    except NotInstalled:
        raise RabbitError(
            f"{directive} names a global Lustre file system (DW_GLOBAL_), and this cluster serves "
            "no LustreFileSystem (lus.cray.hpe.com): install NNF's Lustre operator"
        ) from None
    except Forbidden as err:
        raise RabbitError(
            f"{directive} names a global Lustre file system (DW_GLOBAL_): listing "
            f"LustreFileSystems in every namespace is not allowed ({err})"
        ) from None


def read_nnf(kube: Kube, flow: Workflow, uid: int, gid: int, root: str = MOUNT_ROOT) -> NnfView:
    """What NNF wrote for the Workflow (``kube`` in its namespace), checked
    against the job owner's ``uid`` and ``gid``."""
    timeout: float | None = _timeout(None)
    for index in flow.containers():
        name = f"{flow.name}-{index}"
        found = kube.get("NnfContainerProfile", name)
        if found is None:
            raise RabbitError(
                f"no NnfContainerProfile {name} for {flow.directive(index)}: NNF pins the "
                "directive's profile at Proposal (is NNF serving this Workflow?)"
            )
        data = found.get("data") or {}
        if not isinstance(data, Mapping):
            raise RabbitError(
                f"NnfContainerProfile {name} data must be a mapping, not {shown(data)}"
            )
        profile = dict(data)
        problem = _profile_problem(flow, uid, gid, profile, name)
        if problem:
            raise RabbitError(problem)
        timeout = _timeout(profile, name)
        if profile.get("createContainer", True):
            raise RabbitError(
                f"NnfContainerProfile {name} data.createContainer is true: NNF starts that "
                "directive's pods itself; a rabbit MiniCluster needs a profile with "
                "createContainer: false"
            )
        data = kube.get("NnfContainerData", name)
        if data is None:
            raise RabbitError(
                f"no NnfContainerData {name} for {flow.directive(index)}: NNF writes it at "
                "PreRun (is the Workflow's PreRun ready?)"
            )
        storage = from_container_data(flow, index, data, root=root)
        if global_names(flow, index):
            storage += from_lustre(flow, index, _lustres(kube, flow.directive(index)), profile)
        return NnfView(_with_directories(kube, flow, storage), profile, timeout)
    accesses = {
        fs.index: kube.get("NnfAccess", f"{flow.name}-{fs.index}-servers")
        for fs in flow.file_systems()
    }
    storage = from_accesses(flow, accesses, root=root)
    return NnfView(_with_directories(kube, flow, storage), None, timeout)
