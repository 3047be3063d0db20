"""RFC 20 resource set R, version 1: what each broker rank owns.

fluxhop computes R at render time from declared resources instead of running
``flux R encode --local`` in every pod: hwloc sees the host's CPUs, not the
pod's share, and Flux drains every rank whose R claims more than it has.
Per-node counts may differ between nodes; ranks with identical children share
one ``R_lite`` entry, as ``flux R encode`` writes them.

R is held as those groups plus the nodelist as an RFC 29 hostlist, never as
one object per node, so a uniform 10,000-node R costs as much as a 1-node R.

The JSON text matches flux-core's writer (``rlist_to_R`` + ``json_dumps``):
``", "``/``": "`` separators and keys in the order version, execution
{R_lite, nslots, starttime, expiration, nodelist, properties}, scheduling.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluxhop.arguments import checked
from fluxhop.errors import HostlistError, IdsetError, InvalidResourceSet
from fluxhop.flux import hostlist, idset
from fluxhop.nesting import check_data, check_json_text

__all__ = ["Node", "ResourceSet"]

_BAD_PROPERTY_CHARS = set("!&'\"^`|()")

Ranges = tuple[tuple[int, int], ...]  # inclusive (lo, hi) runs of ranks


@dataclass(frozen=True)
class Node:
    """One execution target (broker rank) and the resources it holds."""

    rank: int
    cores: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    hostname: str | None = None


def _size(ranges: Ranges) -> int:
    return sum(hi - lo + 1 for lo, hi in ranges)


def _first(count: int) -> Ranges:
    """Ids 0..count-1 as runs (none for 0)."""
    return ((0, count - 1),) if count else ()


@dataclass(frozen=True)
class Group:
    """Ranks that hold identical children (one ``R_lite`` entry). Ranks, cores
    and GPUs are all kept as runs, so a count costs nothing in proportion to
    it (``-c 1000000000`` is one run, not a billion ints)."""

    ranks: Ranges
    cores: Ranges
    gpus: Ranges

    def count(self) -> int:
        return _size(self.ranks)

    def rank_list(self) -> list[int]:
        return [rank for lo, hi in self.ranks for rank in range(lo, hi + 1)]


def _runs(ranks: Sequence[int]) -> Ranges:
    runs: list[tuple[int, int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], rank)
        else:
            runs.append((rank, rank))
    return tuple(runs)


def _ranges_text(ranges: Ranges) -> str:
    return ",".join(f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in ranges)


def _counts(value: int | Sequence[int], nnodes: int, what: str) -> list[int] | int:
    if isinstance(value, bool):
        raise InvalidResourceSet(f"{what} must be a count, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidResourceSet(f"{what} per node must be integers >= 0, not {value!r}")
        return value
    counts = list(value)
    if len(counts) != nnodes:
        raise InvalidResourceSet(f"{what} lists {len(counts)} per-node counts for {nnodes} nodes")
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidResourceSet(f"{what} per node must be integers >= 0, not {count!r}")
    return counts


@dataclass(frozen=True)
class ResourceSet:
    """An R version 1 document."""

    groups: tuple[Group, ...]
    nodelist_text: str | None = None
    properties: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starttime: float = 0.0
    expiration: float = 0.0
    nslots: int | None = None
    scheduling: Any = None

    @classmethod
    @checked
    def from_nodes(
        cls,
        hosts: Sequence[str] | str,
        cores: int | Sequence[int] = 1,
        gpus: int | Sequence[int] = 0,
    ) -> ResourceSet:
        """R for ``hosts`` (rank = position) with per-node core and GPU counts.

        ``hosts`` is a list of host names or an RFC 29 hostlist string;
        ``cores``/``gpus`` are one count for every node or one count per node.
        """
        if isinstance(hosts, str):
            try:
                text, nnodes = hosts, hostlist.count(hosts)
            except HostlistError as err:
                raise InvalidResourceSet(f"hosts: {err}") from None
        else:
            names = list(hosts)
            if len(set(names)) != len(names):
                raise InvalidResourceSet("hosts must be unique: one broker rank per host")
            try:
                text, nnodes = hostlist.encode(names), len(names)
            except HostlistError as err:
                raise InvalidResourceSet(f"hosts: {err}") from None
        if nnodes == 0:
            raise InvalidResourceSet("a resource set needs at least one node")
        core_counts = _counts(cores, nnodes, "cores")
        gpu_counts = _counts(gpus, nnodes, "gpus")
        if isinstance(core_counts, int) and isinstance(gpu_counts, int):
            if core_counts == 0 and gpu_counts == 0:
                raise InvalidResourceSet("nodes have no cores and no gpus")
            group = Group(((0, nnodes - 1),), _first(core_counts), _first(gpu_counts))
            return cls((group,), text)
        per_core = core_counts if isinstance(core_counts, list) else [core_counts] * nnodes
        per_gpu = gpu_counts if isinstance(gpu_counts, list) else [gpu_counts] * nnodes
        by_children: dict[tuple[int, int], list[int]] = {}
        for rank, (ncores, ngpus) in enumerate(zip(per_core, per_gpu, strict=True)):
            if ncores == 0 and ngpus == 0:
                raise InvalidResourceSet(f"node of rank {rank} has no cores and no gpus")
            by_children.setdefault((ncores, ngpus), []).append(rank)
        groups = tuple(
            Group(_runs(ranks), _first(ncores), _first(ngpus))
            for (ncores, ngpus), ranks in by_children.items()
        )
        return cls(groups, text)

    @property
    def nnodes(self) -> int:
        return sum(group.count() for group in self.groups)

    @property
    def ncores(self) -> int:
        return sum(group.count() * _size(group.cores) for group in self.groups)

    @property
    def ngpus(self) -> int:
        return sum(group.count() * _size(group.gpus) for group in self.groups)

    @property
    def ranks(self) -> list[int]:
        return sorted(rank for group in self.groups for rank in group.rank_list())

    @property
    def nodelist(self) -> list[str]:
        """Host names in rank order (empty when R carries no nodelist)."""
        return hostlist.decode(self.nodelist_text) if self.nodelist_text else []

    @property
    def nodes(self) -> list[Node]:
        """One :class:`Node` per rank, in rank order (expands the whole set)."""
        by_rank = {rank: group for group in self.groups for rank in group.rank_list()}
        names = self.nodelist
        return [
            Node(
                rank,
                _expand(by_rank[rank].cores),
                _expand(by_rank[rank].gpus),
                names[i] if names else None,
            )
            for i, rank in enumerate(sorted(by_rank))
        ]

    def to_dict(self) -> dict[str, Any]:
        r_lite = []
        for group in self.groups:
            children = {}
            if group.cores:
                children["core"] = _ranges_text(group.cores)
            if group.gpus:
                children["gpu"] = _ranges_text(group.gpus)
            r_lite.append({"rank": _ranges_text(group.ranks), "children": children})
        execution: dict[str, Any] = {"R_lite": r_lite}
        if self.nslots is not None:
            execution["nslots"] = self.nslots
        execution["starttime"] = float(self.starttime)
        execution["expiration"] = float(self.expiration)
        if self.nodelist_text:
            execution["nodelist"] = [self.nodelist_text]
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
    @checked
    def from_json(cls, text: str | bytes | Mapping[str, Any] | None) -> ResourceSet:
        """Parse R; anything malformed raises :class:`InvalidResourceSet`.

        No R (``None`` or the JSON ``null``) is the empty set, as flux's own
        ``ResourceSet()`` is: 0 nodes, 0 cores.
        """
        if text is None:
            return cls.empty()
        if isinstance(text, Mapping):
            doc: Any = text
        else:
            try:  # bounded before json.loads, which recurses
                if isinstance(text, bytes):
                    text = text.decode(json.detect_encoding(text))
                check_json_text(text, "R", error=InvalidResourceSet)
                doc = json.loads(text)
            except InvalidResourceSet:
                raise
            except ValueError as err:  # UnicodeDecodeError and JSONDecodeError
                raise InvalidResourceSet(f"R is not valid JSON: {err}") from None
        # JSON's values only, and bounded: to_json() must be able to write it back
        check_data(doc, "R", error=InvalidResourceSet, json=True)
        return cls.empty() if doc is None else _from_doc(doc)

    @classmethod
    def empty(cls) -> ResourceSet:
        """The resource set of no resources."""
        return cls(groups=())


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidResourceSet(message)


def _expand(ranges: Ranges) -> tuple[int, ...]:
    return tuple(i for lo, hi in ranges for i in range(lo, hi + 1))


def _decode_idset(text: Any, where: str) -> list[int]:
    _require(isinstance(text, str), f"R {where} must be an idset string")
    try:
        return idset.decode(text)
    except IdsetError as err:
        raise InvalidResourceSet(f"R {where}: {err}") from None


def _idset_runs(text: Any, where: str) -> Ranges:
    _require(isinstance(text, str), f"R {where} must be an idset string")
    try:
        return tuple(idset.runs(text))
    except IdsetError as err:
        raise InvalidResourceSet(f"R {where}: {err}") from None


def _overlap(groups: Sequence[Group]) -> int | None:
    """The first rank that two groups share, if any (runs only, no expansion)."""
    spans = sorted(span for group in groups for span in group.ranks)
    for (_, hi), (lo, _) in itertools.pairwise(spans):
        if lo <= hi:
            return lo
    return None


def _covered(members: Sequence[int], groups: Sequence[Group]) -> list[int]:
    """The members that no group's ranks include."""
    spans = [span for group in groups for span in group.ranks]
    return [m for m in members if not any(lo <= m <= hi for lo, hi in spans)]


def _number(value: Any, where: str) -> float:
    _require(
        isinstance(value, (int, float)) and not isinstance(value, bool),
        f"R execution.{where} must be a number",
    )
    return float(value)


def _groups(r_lite: Any) -> tuple[Group, ...]:
    if isinstance(r_lite, dict):
        _require(not r_lite, "R execution.R_lite must be an array")
        return ()
    _require(isinstance(r_lite, list), "R execution.R_lite must be an array")
    groups: list[Group] = []
    for index, entry in enumerate(r_lite):
        where = f"execution.R_lite[{index}]"
        _require(isinstance(entry, dict), f"R {where} must be an object")
        _require("rank" in entry, f"R {where} has no rank")
        children = entry.get("children")
        _require(isinstance(children, dict), f"R {where}.children must be an object")
        cores = (
            _idset_runs(children["core"], f"{where}.children.core") if "core" in children else ()
        )
        gpus = _idset_runs(children["gpu"], f"{where}.children.gpu") if "gpu" in children else ()
        groups.append(Group(_idset_runs(entry["rank"], f"{where}.rank"), cores, gpus))
    repeated = _overlap(groups)
    _require(repeated is None, f"R rank {repeated} appears in more than one R_lite entry")
    return tuple(groups)


def _nodelist(value: Any, nranks: int) -> str | None:
    if value is None:
        return None
    _require(isinstance(value, list), "R execution.nodelist must be an array of hostlists")
    _require(
        all(isinstance(item, str) for item in value), "R execution.nodelist entries must be strings"
    )
    text = ",".join(item for item in value if item)
    try:
        count = hostlist.count(text)
    except HostlistError as err:
        raise InvalidResourceSet(f"R execution.nodelist: {err}") from None
    _require(count == nranks, f"R execution.nodelist names {count} hosts for {nranks} ranks")
    return text


def _properties(value: Any, groups: Sequence[Group]) -> dict[str, tuple[int, ...]]:
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
        missing = _covered(members, groups)
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
    groups = _groups(execution["R_lite"])
    nranks = sum(group.count() for group in groups)
    nodelist = _nodelist(execution.get("nodelist"), nranks)
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
        groups=groups,
        nodelist_text=nodelist,
        properties=_properties(execution.get("properties"), groups),
        starttime=starttime,
        expiration=expiration,
        nslots=nslots,
        scheduling=doc.get("scheduling"),
    )
