"""RFC 20 resource set R, version 1: what each broker rank owns.

fluxhop computes R at render time from declared resources instead of running
``flux R encode --local`` in every pod: hwloc sees the host's CPUs, not the
pod's share, and Flux drains every rank whose R claims more than it has.
Per-node counts may differ between nodes; ranks with identical children share
one ``R_lite`` entry, as ``flux R encode`` writes them.

The JSON text matches flux-core's writer (``rlist_to_R`` + ``json_dumps``):
``", "``/``": "`` separators and keys in the order version, execution
{R_lite, nslots, starttime, expiration, nodelist, properties}, scheduling.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluxhop.errors import HostlistError, IdsetError, InvalidResourceSet
from fluxhop.flux import hostlist, idset

__all__ = ["Node", "ResourceSet"]

_BAD_PROPERTY_CHARS = set("!&'\"^`|()")


@dataclass(frozen=True)
class Node:
    """One execution target (broker rank) and the resources it holds."""

    rank: int
    cores: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    hostname: str | None = None


def _counts(value: int | Sequence[int], nnodes: int, what: str) -> list[int]:
    if isinstance(value, bool):
        raise InvalidResourceSet(f"{what} must be a count, not {value!r}")
    if isinstance(value, int):
        counts = [value] * nnodes
    else:
        counts = list(value)
        if len(counts) != nnodes:
            raise InvalidResourceSet(
                f"{what} lists {len(counts)} per-node counts for {nnodes} nodes"
            )
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidResourceSet(f"{what} per node must be integers >= 0, not {count!r}")
    return counts


@dataclass(frozen=True)
class ResourceSet:
    """An R version 1 document: nodes in rank order plus optional extras."""

    nodes: tuple[Node, ...]
    properties: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starttime: float = 0.0
    expiration: float = 0.0
    nslots: int | None = None
    scheduling: Any = None

    @classmethod
    def from_nodes(
        cls,
        hosts: Sequence[str],
        cores: int | Sequence[int] = 1,
        gpus: int | Sequence[int] = 0,
    ) -> ResourceSet:
        """R for ``hosts`` (rank = position) with per-node core and GPU counts.

        ``cores``/``gpus`` are one count for every node or one count per node.
        """
        if isinstance(hosts, str):
            raise InvalidResourceSet("hosts must be a list of host names, not a string")
        hosts = list(hosts)
        if not hosts:
            raise InvalidResourceSet("a resource set needs at least one node")
        if len(set(hosts)) != len(hosts):
            raise InvalidResourceSet("hosts must be unique: one broker rank per host")
        core_counts = _counts(cores, len(hosts), "cores")
        gpu_counts = _counts(gpus, len(hosts), "gpus")
        nodes = []
        for rank, (host, ncores, ngpus) in enumerate(
            zip(hosts, core_counts, gpu_counts, strict=True)
        ):
            if ncores == 0 and ngpus == 0:
                raise InvalidResourceSet(f"node {host} has no cores and no gpus")
            nodes.append(Node(rank, tuple(range(ncores)), tuple(range(ngpus)), host))
        return cls(tuple(nodes))

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    @property
    def ncores(self) -> int:
        return sum(len(node.cores) for node in self.nodes)

    @property
    def ngpus(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)

    @property
    def ranks(self) -> list[int]:
        return [node.rank for node in self.nodes]

    @property
    def nodelist(self) -> list[str]:
        """Host names in rank order (empty when R carries no nodelist)."""
        if any(node.hostname is None for node in self.nodes):
            return []
        return [node.hostname for node in self.nodes]  # type: ignore[misc]

    def to_dict(self) -> dict[str, Any]:
        groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
        for node in self.nodes:
            groups.setdefault((node.cores, node.gpus), []).append(node.rank)
        r_lite = []
        for (cores, gpus), ranks in groups.items():
            children = {}
            if cores:
                children["core"] = idset.encode(cores)
            if gpus:
                children["gpu"] = idset.encode(gpus)
            r_lite.append({"rank": idset.encode(ranks), "children": children})
        execution: dict[str, Any] = {"R_lite": r_lite}
        if self.nslots is not None:
            execution["nslots"] = self.nslots
        execution["starttime"] = float(self.starttime)
        execution["expiration"] = float(self.expiration)
        if self.nodelist:
            execution["nodelist"] = [hostlist.encode(self.nodelist)]
        if self.properties:
            execution["properties"] = {
                name: idset.encode(ranks) for name, ranks in self.properties.items()
            }
        doc: dict[str, Any] = {"version": 1, "execution": execution}
        if self.scheduling is not None:
            doc["scheduling"] = self.scheduling
        return doc

    def to_json(self) -> str:
        """R as one line of JSON, in flux-core's key order and separators."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes | Mapping[str, Any]) -> ResourceSet:
        """Parse R; anything malformed raises :class:`InvalidResourceSet`."""
        if isinstance(text, Mapping):
            doc: Any = text
        else:
            try:
                doc = json.loads(text)
            except (TypeError, ValueError) as err:
                raise InvalidResourceSet(f"R is not valid JSON: {err}") from None
        return _from_doc(doc)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidResourceSet(message)


def _decode_idset(text: Any, where: str) -> list[int]:
    _require(isinstance(text, str), f"R {where} must be an idset string")
    try:
        return idset.decode(text)
    except IdsetError as err:
        raise InvalidResourceSet(f"R {where}: {err}") from None


def _number(value: Any, where: str) -> float:
    _require(
        isinstance(value, (int, float)) and not isinstance(value, bool),
        f"R execution.{where} must be a number",
    )
    return float(value)


def _r_lite_nodes(r_lite: Any) -> dict[int, Node]:
    if isinstance(r_lite, dict):
        _require(not r_lite, "R execution.R_lite must be an array")
        return {}
    _require(isinstance(r_lite, list), "R execution.R_lite must be an array")
    nodes: dict[int, Node] = {}
    for index, entry in enumerate(r_lite):
        where = f"execution.R_lite[{index}]"
        _require(isinstance(entry, dict), f"R {where} must be an object")
        _require("rank" in entry, f"R {where} has no rank")
        children = entry.get("children")
        _require(isinstance(children, dict), f"R {where}.children must be an object")
        cores = (
            tuple(_decode_idset(children["core"], f"{where}.children.core"))
            if "core" in children
            else ()
        )
        gpus = (
            tuple(_decode_idset(children["gpu"], f"{where}.children.gpu"))
            if "gpu" in children
            else ()
        )
        for rank in _decode_idset(entry["rank"], f"{where}.rank"):
            _require(rank not in nodes, f"R rank {rank} appears in more than one R_lite entry")
            nodes[rank] = Node(rank, cores, gpus)
    return nodes


def _nodelist(value: Any, nranks: int) -> list[str] | None:
    if value is None:
        return None
    _require(isinstance(value, list), "R execution.nodelist must be an array of hostlists")
    hosts: list[str] = []
    for item in value:
        _require(isinstance(item, str), "R execution.nodelist entries must be strings")
        try:
            hosts.extend(hostlist.decode(item))
        except HostlistError as err:
            raise InvalidResourceSet(f"R execution.nodelist: {err}") from None
    _require(
        len(hosts) == nranks,
        f"R execution.nodelist names {len(hosts)} hosts for {nranks} ranks",
    )
    return hosts


def _properties(value: Any, ranks: set[int]) -> dict[str, tuple[int, ...]]:
    if value is None:
        return {}
    _require(isinstance(value, dict), "R execution.properties must be an object")
    result = {}
    for name, text in value.items():
        _require(
            bool(name) and not _BAD_PROPERTY_CHARS.intersection(name),
            f"R property name {name!r} is invalid",
        )
        members = _decode_idset(text, f"execution.properties.{name}")
        missing = [rank for rank in members if rank not in ranks]
        _require(not missing, f"R property {name}: ranks {idset.encode(missing)} not found")
        result[name] = tuple(members)
    return result


def _from_doc(doc: Any) -> ResourceSet:
    _require(isinstance(doc, dict), "R must be a JSON object")
    _require("version" in doc, "R has no version")
    version = doc["version"]
    _require(
        version == 1 and not isinstance(version, bool),
        f"R invalid version={version!r}; only 1 is supported",
    )
    execution = doc.get("execution")
    _require(isinstance(execution, dict), "R has no execution object")
    _require("R_lite" in execution, "R execution has no R_lite")
    by_rank = _r_lite_nodes(execution["R_lite"])
    ordered = sorted(by_rank)
    hosts = _nodelist(execution.get("nodelist"), len(ordered))
    nodes = tuple(
        Node(rank, by_rank[rank].cores, by_rank[rank].gpus, hosts[i] if hosts else None)
        for i, rank in enumerate(ordered)
    )
    starttime = _number(execution.get("starttime", 0.0), "starttime")
    expiration = _number(execution.get("expiration", 0.0), "expiration")
    _require(
        not (starttime and expiration and expiration <= starttime),
        "R execution.expiration must be later than starttime",
    )
    nslots = execution.get("nslots")
    if nslots is not None:
        _require(
            isinstance(nslots, int) and not isinstance(nslots, bool) and nslots > 0,
            "R execution.nslots must be a positive integer",
        )
    return ResourceSet(
        nodes=nodes,
        properties=_properties(execution.get("properties"), set(ordered)),
        starttime=starttime,
        expiration=expiration,
        nslots=nslots,
        scheduling=doc.get("scheduling"),
    )
