"""The file systems a rabbit MiniCluster mounts, where NNF says they are.

By PreRun NNF has mounted each file system of a Workflow on its rabbits.
For a ``#DW container`` directive whose container profile says
``createContainer: false``, NNF starts no pods of its own and writes
NnfContainerData ``<workflow>-<directive index>`` instead: ``data.volumes[]``
``{name, command, directiveIndex, mountPath}``, the volumes it would have
mounted into its own containers, for an outside orchestrator to mount.
Without such a directive, each file system's rabbit-side NnfAccess
(``<workflow>-<i>-servers``) holds its ``mountPath``.

fluxhop mounts each volume at that path, in the pods as on the rabbit (as
NNF's own containers have it) and announces it as NNF does:
``DW_JOB_<name>`` / ``DW_PERSISTENT_<name>`` (``-`` becomes ``_``) holds the
path. It never composes a path itself: NNF's prefix is a setting of NNF's
(``SERVER_MOUNT_PREFIX``, a storage profile's ``$MOUNT_PATH``).

GFS2 and XFS are mounted on a rabbit as one directory per compute node it
serves, ``<rabbit>-<k>``; which k is a compute's is in that compute's
ClientMount (``spec.mounts[].device.deviceReference.data``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.errors import shown
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.workflow import Workflow

__all__ = [
    "MOUNT_ROOT",
    "RabbitVolume",
    "directories_variable",
    "from_accesses",
    "from_container_data",
    "index_directories",
    "reserved",
]

MOUNT_ROOT = "/mnt/nnf"  # NNF's SERVER_MOUNT_PREFIX default
COMMANDS = ("jobdw", "persistentdw")


@dataclass(frozen=True)
class RabbitVolume:
    """One file system NNF mounted on the rabbits, for the MiniCluster's pods."""

    name: str  # the directive's name= (NnfContainerData's, ``_`` already ``-``)
    command: str  # "jobdw" or "persistentdw"
    directive_index: int
    mount_path: str
    # GFS2/XFS: each compute node's directory in the mount, (compute, "<rabbit>-<k>")
    directories: tuple[tuple[str, str], ...] = ()

    @property
    def env_name(self) -> str:
        prefix = "DW_JOB_" if self.command == "jobdw" else "DW_PERSISTENT_"
        return prefix + self.name.replace("-", "_")

    @property
    def volume_name(self) -> str:
        return f"rabbit-{self.directive_index}"


def _mount_path(value: Any, where: str, root: str) -> str:
    if not isinstance(value, str) or not value:
        raise RabbitError(f"{where}.mountPath must be a path, not {shown(value)}")
    if not value.startswith("/"):
        raise RabbitError(f"{where}.mountPath {shown(value)} is relative: NNF's paths are absolute")
    normal = posixpath.normpath(value)
    if normal != root and not normal.startswith(root.rstrip("/") + "/"):
        raise RabbitError(
            f"{where}.mountPath {shown(value)} is outside NNF's mount root {root}; a rabbit "
            f"MiniCluster mounts only what NNF mounted there (set the root if NNF's differs)"
        )
    return normal


def _named(flow: Workflow, container_index: int) -> dict[str, int]:
    """The storage the container directive names: volume name -> the index
    of the jobdw/persistentdw directive it names."""
    args = flow.arguments(container_index)[1]
    by_name = {a.get("name"): i for i, (c, a) in enumerate(map(flow.arguments, range(len(flow.directives))))
               if c in COMMANDS}  # fmt: skip
    named: dict[str, int] = {}
    for key, target in args.items():
        if key.startswith(("DW_JOB_", "DW_PERSISTENT_")) and target in by_name:
            named[key.split("_", 2)[2].replace("_", "-")] = by_name[target]
    return named


def from_container_data(
    flow: Workflow, container_index: int, obj: Mapping[str, Any], *, root: str = MOUNT_ROOT
) -> list[RabbitVolume]:
    """The volumes of NnfContainerData ``obj`` (the Workflow's directive
    ``container_index``), each checked; every file system the directive
    names must be there."""
    where = f"NnfContainerData {flow.name}-{container_index}"
    volumes = (obj.get("data") or {}).get("volumes")
    if not isinstance(volumes, list):
        raise RabbitError(f"{where} has no data.volumes list; NNF writes it at PreRun")
    found: list[RabbitVolume] = []
    for n, entry in enumerate(volumes):
        at = f"{where} data.volumes[{n}]"
        if not isinstance(entry, Mapping):
            raise RabbitError(f"{at} must be a mapping, not {shown(entry)}")
        name, command, index = entry.get("name"), entry.get("command"), entry.get("directiveIndex")
        if not isinstance(name, str) or not name:
            raise RabbitError(f"{at}.name must be a volume name, not {shown(name)}")
        if command not in COMMANDS:
            raise RabbitError(f"{at}.command must be jobdw or persistentdw, not {shown(command)}")
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index < len(flow.directives)
        ):
            raise RabbitError(
                f"{at}.directiveIndex {shown(index)} is no directive of Workflow {flow.name}"
            )
        path = _mount_path(entry.get("mountPath"), at, root)
        found.append(RabbitVolume(name, str(command), index, path))
    listed = {v.name for v in found}
    for name, index in sorted(_named(flow, container_index).items()):
        if name not in listed:
            raise RabbitError(
                f"{where} lists no volume {name!r} (directive {index}), which "
                f"{flow.directive(container_index)} names; NNF has not mounted it"
            )
    return found


def from_accesses(
    flow: Workflow, accesses: Mapping[int, Mapping[str, Any] | None], *, root: str = MOUNT_ROOT
) -> list[RabbitVolume]:
    """Without NnfContainerData: each mountable file system of the Workflow
    at its ``<workflow>-<i>-servers`` NnfAccess ``spec.mountPath``
    (``accesses`` by directive index; None where NNF made none)."""
    found = []
    for fs in flow.file_systems():
        access = accesses.get(fs.index)
        if access is None and fs.command == "persistentdw":
            continue  # its type is the storage's: NNF mounts GFS2/Lustre/raw on rabbits only
        if access is None:
            raise RabbitError(
                f"no NnfAccess {flow.name}-{fs.index}-servers for {flow.directive(fs.index)}: "
                "NNF has not mounted it on the rabbits (is the Workflow at PreRun?)"
            )
        where = f"NnfAccess {flow.name}-{fs.index}-servers spec"
        path = _mount_path((access.get("spec") or {}).get("mountPath"), where, root)
        found.append(RabbitVolume(fs.name, fs.command, fs.index, path))
    return found


def reserved(flow: Workflow) -> list[RabbitVolume]:
    """Stand-ins for the volumes NNF will say where, one per name fluxhop
    may announce for the Workflow (its file systems', and the container
    directive's DW_* arguments'), so that a job's own variables and every
    other field are checked before anything is read from the cluster."""
    indexed = {fs.index for fs in flow.file_systems() if fs.type == "gfs2"}
    marks = (("", ""),)  # a GFS2 volume also announces its directories
    found = [
        RabbitVolume(
            fs.name, fs.command, fs.index, MOUNT_ROOT, marks if fs.index in indexed else ()
        )
        for fs in flow.file_systems()
    ]
    for container in flow.containers():
        for name, index in _named(flow, container).items():
            command = flow.arguments(index)[0]
            found.append(
                RabbitVolume(name, command, index, MOUNT_ROOT, marks if index in indexed else ())
            )
    return found


OWNER_NAME = "dataworkflowservices.github.io/owner.name"  # NNF's label: the NnfAccess


def index_directories(
    client_mounts: Iterable[Mapping[str, Any]], flow: Workflow, index: int
) -> dict[str, str]:
    """compute node -> its directory in the GFS2/XFS mount of directive
    ``index`` (``<rabbit>-<k>``), from the computes' ClientMounts of that
    file system (those NNF made for NnfAccess ``<workflow>-<index>-computes``)."""
    access = f"{flow.name}-{index}-computes"
    found: dict[str, str] = {}
    for mount in client_mounts:
        if ((mount.get("metadata") or {}).get("labels") or {}).get(OWNER_NAME) != access:
            continue
        spec = mount.get("spec") or {}
        node = spec.get("node")
        for entry in spec.get("mounts") or []:
            reference = ((entry.get("device") or {}).get("deviceReference")) or {}
            rabbit = (reference.get("objectReference") or {}).get("namespace")
            k = reference.get("data")
            if isinstance(node, str) and isinstance(rabbit, str) and isinstance(k, int):
                found[node] = f"{rabbit}-{k}"
    return dict(sorted(found.items()))


def directories_variable(volume: RabbitVolume) -> tuple[str, str] | None:
    """The variable that tells a GFS2/XFS volume's per-compute directories
    to the pods: ``DW_JOB_<name>_DIRECTORIES``, ``compute=<rabbit>-<k>``
    pairs separated by spaces (None for a volume without them)."""
    if not volume.directories:
        return None
    pairs = " ".join(f"{compute}={directory}" for compute, directory in volume.directories)
    return f"{volume.env_name}_DIRECTORIES", pairs
