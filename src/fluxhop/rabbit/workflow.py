"""A DWS Workflow and the rabbit file systems its ``#DW`` directives create.

Directive number *i* is the one at position *i* of ``spec.dwDirectives``:
NNF names what it makes for it ``<workflow>-<i>``, so every directive is
located by its own index (the prototype assumed index 0). Only GFS2 and
Lustre can be mounted a second time, into a container; XFS and raw storage
cannot, and copy/container directives create none. ``persistentdw``
storage is mounted the same way. Where NNF mounted each one is NNF's to
say (fluxhop.rabbit.storage), never composed here.

Workflows are read and written at DWS's served storage version, v1alpha7.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.errors import shown
from fluxhop.rabbit.errors import RabbitError
from fluxhop.render.objects import owner_reference

__all__ = ["API_VERSION", "MOUNTABLE_TYPES", "FileSystem", "Workflow"]

API_VERSION = "dataworkflowservices.github.io/v1alpha7"
DIRECTIVE_SHOWN = 200  # characters of a directive quoted in a message
MOUNTABLE_TYPES = ("gfs2", "lustre")
PORTS = "NNF_CONTAINER_PORTS"  # in status.env, from nnf-sos' addPortsEnvVars


@dataclass(frozen=True)
class FileSystem:
    """One mountable rabbit file system of a Workflow."""

    index: int
    command: str  # "jobdw" or "persistentdw"
    name: str
    type: str | None


def _arguments(directive: str) -> tuple[str, dict[str, str]]:
    """``#DW jobdw type=gfs2 name=x`` -> ("jobdw", {"type": "gfs2", "name": "x"})."""
    try:
        words = shlex.split(directive)
    except ValueError:
        words = directive.split()
    if len(words) < 2 or words[0] != "#DW":
        return "", {}
    pairs = dict(word.split("=", 1) for word in words[2:] if "=" in word)
    return words[1], pairs


@dataclass(frozen=True)
class Workflow:
    """The parts of a ``dataworkflowservices.github.io`` Workflow fluxhop needs."""

    name: str
    namespace: str
    uid: str
    directives: tuple[str, ...] = ()
    api_version: str = API_VERSION
    user_id: int | None = None  # spec.userID: whose job it is (DWS requires it)
    group_id: int | None = None  # spec.groupID
    # status.env's NNF_CONTAINER_PORTS and NNF_CONTAINER_PORTS_<container>:
    # the ports NNF's port manager gave the Workflow's containers
    ports: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Workflow:
        metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not isinstance(metadata, Mapping) or not metadata.get("name") or not metadata.get("uid"):
            raise RabbitError(
                "the Workflow has no metadata.name or metadata.uid; pass the object read from the API server"
            )
        for key in ("name", "namespace", "uid"):
            value = metadata.get(key)
            if value is not None and not isinstance(value, str):
                raise RabbitError(
                    f"the Workflow's metadata.{key} must be a string, not {shown(value)}"
                )
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise RabbitError(
                f"Workflow {metadata['name']} spec must be a mapping, not {shown(spec)}"
            )
        directives = spec.get("dwDirectives") or []
        if not isinstance(directives, list) or not all(isinstance(d, str) for d in directives):
            raise RabbitError("Workflow spec.dwDirectives must be a list of #DW strings")
        ids = {}
        for key in ("userID", "groupID"):
            value = spec.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise RabbitError(
                    f"Workflow {metadata['name']} spec.{key} must be a number, not {shown(value)}"
                )
            ids[key] = value
        status = obj.get("status") or {}
        if not isinstance(status, Mapping):
            raise RabbitError(
                f"Workflow {metadata['name']} status must be a mapping, not {shown(status)}"
            )
        status_env = status.get("env") or {}
        if not isinstance(status_env, Mapping):
            raise RabbitError(f"Workflow {metadata['name']} status.env must be a map")
        ports = []
        for key, value in sorted(status_env.items()):
            if str(key) == PORTS or str(key).startswith(f"{PORTS}_"):
                if not isinstance(value, str):
                    raise RabbitError(
                        f"Workflow {metadata['name']} status.env.{key} must be a string, not {shown(value)}"
                    )
                ports.append((str(key), value))
        return cls(
            name=str(metadata["name"]),
            namespace=str(metadata.get("namespace") or "default"),
            uid=str(metadata["uid"]),
            directives=tuple(directives),
            api_version=str(obj.get("apiVersion") or cls.api_version),
            user_id=ids["userID"],
            group_id=ids["groupID"],
            ports=tuple(ports),
        )

    def port_numbers(self) -> list[int]:
        """Every port the NNF_CONTAINER_PORTS variables list, in their order
        (NNF's "30000,30001"; nnf-sos getContainerPortsList). Checked here, for
        the MiniCluster to be made, not as the Workflow is read: a Workflow
        whose ports are wrong must still be torn down."""
        numbers: list[int] = []
        for key, listed in self.ports:
            try:
                ports = [int(word) for word in listed.split(",") if word.strip()]
                if any(not 1 <= port <= 65535 for port in ports):
                    raise ValueError(listed)
            except ValueError:
                raise RabbitError(
                    f"Workflow {self.name} status.env.{key} must list port numbers (1-65535) "
                    f"with commas, not {shown(listed)}"
                ) from None
            numbers += ports if key == PORTS else []
        return numbers

    def owner_problem(self, uid: int, gid: int) -> str | None:
        """Why a job owner of ``uid``/``gid`` may not run this Workflow's
        MiniCluster (it is another user's or group's), or None."""
        for what, mine, theirs in (("userID", uid, self.user_id), ("groupID", gid, self.group_id)):
            if theirs is not None and mine != theirs:
                return (
                    f"Workflow {self.name} is {what} {theirs}'s, not {mine}'s: a rabbit "
                    "MiniCluster runs as the Workflow's own user and group"
                )
        return None

    @property
    def owner_reference(self) -> dict[str, Any]:
        """Makes the MiniCluster garbage when the Workflow goes (not its controller)."""
        workflow = {
            "apiVersion": self.api_version,
            "kind": "Workflow",
            "metadata": {"name": self.name, "uid": self.uid},
        }
        return owner_reference(workflow, controller=False)

    def arguments(self, index: int) -> tuple[str, dict[str, str]]:
        """Directive ``index`` as (command, its key=value arguments)."""
        return _arguments(self.directives[index])

    def directive(self, index: int) -> str:
        """Directive ``index`` as it can be quoted in a one-line message
        (escaped; whole unless it is very long: directives run long)."""
        return shown(self.directives[index], most=DIRECTIVE_SHOWN)

    def containers(self) -> list[int]:
        """The indexes of its ``#DW container`` directives."""
        return [i for i in range(len(self.directives)) if self.arguments(i)[0] == "container"]

    def file_systems(self) -> list[FileSystem]:
        found: list[FileSystem] = []
        for index in range(len(self.directives)):
            command, args = self.arguments(index)
            if command not in ("jobdw", "persistentdw") or not args.get("name"):
                continue
            kind = args.get("type", "").lower() or None
            if command == "jobdw" and kind not in MOUNTABLE_TYPES:
                continue  # xfs and raw are per compute node and cannot be mounted twice
            found.append(FileSystem(index, command, args["name"], kind))
        return found
