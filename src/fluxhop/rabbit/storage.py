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

A global Lustre file system (``DW_GLOBAL_<name>=<path>`` on the container
directive) is no NNF mount: as nnf-sos does, the LustreFileSystem whose
``spec.mountRoot`` the path starts with gives it, mounted at that root
through the PersistentVolumeClaim the Lustre operator made in the
Workflow's namespace, ``<lustre>-<its namespace>-<mode>-pvc`` (the mode the
container profile's ``storages[].pvcMode``, ReadWriteMany by default).
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
    "from_lustre",
    "global_names",
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
    claim: str | None = None  # global Lustre: its PersistentVolumeClaim (command "globaldw")

    @property
    def env_name(self) -> str:
        prefix = {"jobdw": "DW_JOB_", "globaldw": "DW_GLOBAL_"}.get(self.command, "DW_PERSISTENT_")
        return prefix + self.name.replace("-", "_")

    @property
    def volume_name(self) -> str:
        return f"rabbit-{self.directive_index}"  # a global one's: global-<n> (the builder's)


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
    data = obj.get("data") or {}
    if not isinstance(data, Mapping):
        raise RabbitError(f"{where} data must be a mapping, not {shown(data)}")
    volumes = data.get("volumes")
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


def global_names(flow: Workflow, container_index: int) -> dict[str, tuple[str, str]]:
    """The global Lustre file systems the container directive names:
    volume name (``_`` as ``-``) -> (its argument, the path it gives)."""
    return {
        key.removeprefix("DW_GLOBAL_").replace("_", "-"): (key, value)
        for key, value in flow.arguments(container_index)[1].items()
        if key.startswith("DW_GLOBAL_")
    }


def _lustre_for(path: str, lustres: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """nnf-sos' findLustreFileSystemForPath: the first whose mountRoot the
    path starts with (a plain prefix, as NNF's: /lus/home2 is /lus/home's)."""
    for lustre in lustres:
        root = (lustre.get("spec") or {}).get("mountRoot")
        if isinstance(root, str) and root and path.startswith(root):
            return lustre
    return None


def _pvc_mode(profile: Mapping[str, Any] | None, argument: str) -> str:
    """The profile's pvcMode for the argument (the last that names it, as
    NNF reads them), ReadWriteMany without one."""
    mode = "ReadWriteMany"
    for storage in (profile or {}).get("storages") or []:
        if isinstance(storage, Mapping) and storage.get("name") == argument:
            mode = str(storage.get("pvcMode") or mode)
    return mode


def from_lustre(
    flow: Workflow,
    container_index: int,
    lustres: Iterable[Mapping[str, Any]],
    profile: Mapping[str, Any] | None,
) -> list[RabbitVolume]:
    """The global Lustre volumes of the container directive, each from the
    LustreFileSystem that holds its path (``lustres``: every one listed),
    as nnf-sos mounts them into its own containers."""
    listed = list(lustres)
    found = []
    for name, (argument, path) in sorted(global_names(flow, container_index).items()):
        lustre = _lustre_for(path, listed)
        if lustre is None:
            raise RabbitError(
                f"{argument}: no LustreFileSystem holds {shown(path)} (none has a spec.mountRoot "
                "it starts with); name a path of a global Lustre file system"
            )
        meta, spec = lustre.get("metadata") or {}, lustre.get("spec") or {}
        modes = ((spec.get("namespaces") or {}).get(flow.namespace) or {}).get("modes")
        if not modes:
            raise RabbitError(
                f"{argument}: LustreFileSystem {meta.get('name')} is not configured for namespace "
                f"{flow.namespace} (its spec.namespaces has no modes for it); ask the admin to add it"
            )
        root = spec["mountRoot"]
        if not root.startswith("/"):
            raise RabbitError(
                f"LustreFileSystem {meta.get('name')} spec.mountRoot {shown(root)} is relative"
            )
        mode = _pvc_mode(profile, argument)
        if mode.lower() not in [str(m).lower() for m in modes]:
            raise RabbitError(
                f"{argument}: LustreFileSystem {meta.get('name')} has no {mode} claim for namespace "
                f"{flow.namespace} (its modes there: {', '.join(map(str, modes))}); set the container "
                "profile's storages[].pvcMode to one of them"
            )
        claim = f"{meta.get('name')}-{meta.get('namespace')}-{mode}-pvc"
        found.append(RabbitVolume(name, "globaldw", container_index, root, claim=claim.lower()))
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
        for name in global_names(flow, container):
            found.append(RabbitVolume(name, "globaldw", container, MOUNT_ROOT, claim="reserved"))
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
