"""Where NNF mounted a Workflow's file systems, read from the cluster at
PreRun: the NnfContainerData of its ``#DW container`` directive when that
directive's container profile says ``createContainer: false`` (the pinned
copy NNF makes of it, ``<workflow>-<i>``), else each file system's
``<workflow>-<i>-servers`` NnfAccess. A few GETs per Workflow, whatever the
number of Workflows: nothing is listed."""

from __future__ import annotations

from fluxhop.cluster.api import Kube
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.storage import MOUNT_ROOT, RabbitVolume, from_accesses, from_container_data
from fluxhop.rabbit.workflow import Workflow

__all__ = ["nnf_storage"]


def nnf_storage(kube: Kube, flow: Workflow, root: str = MOUNT_ROOT) -> list[RabbitVolume]:
    """The Workflow's file systems, where NNF mounted them (``kube`` in its namespace)."""
    for index in flow.containers():
        name = f"{flow.name}-{index}"
        profile = kube.get("NnfContainerProfile", name)
        if profile is None or (profile.get("data") or {}).get("createContainer", True):
            continue  # NNF runs that directive's pods itself
        data = kube.get("NnfContainerData", name)
        if data is None:
            raise RabbitError(
                f"no NnfContainerData {name} for '{flow.directives[index]}': NNF writes it at "
                "PreRun (is the Workflow's PreRun ready?)"
            )
        return from_container_data(flow, index, data, root=root)
    accesses = {
        fs.index: kube.get("NnfAccess", f"{flow.name}-{fs.index}-servers")
        for fs in flow.file_systems()
    }
    return from_accesses(flow, accesses, root=root)
