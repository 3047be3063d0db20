"""Flux jobspecs: loading (validated by jobspec_rules.py), the resource
summary, and helpers.

:func:`load` validates like flux-core: with ``v1=True`` (the default, what
``job-ingest`` enforces) the RFC 25 V1 rules of the Python ``JobspecV1`` class,
with ``v1=False`` the canonical RFC 14 rules. :func:`set_attribute` applies
``flux run --setattr`` rules and :func:`from_command` builds the jobspec that
``flux run -N -n -c -g`` submits.

The resource summary (:attr:`Jobspec.nnodes`, :attr:`Jobspec.nslots`, ...)
follows flux-core's Python ``ResourceRequest.from_jobspec``: counts of
vertices above a node multiply the node count, and RFC 45 count ranges
contribute their minimum.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluxhop.arguments import checked
from fluxhop.documents import load_all
from fluxhop.errors import InputError, InvalidJobspec
from fluxhop.flux.jobspec_rules import parse_count, validate
from fluxhop.nesting import check_data

__all__ = ["Jobspec", "ResourceSummary", "from_command", "load", "set_attribute", "submittable"]


@dataclass(frozen=True)
class ResourceSummary:
    """What a scheduler reads from a jobspec (flux ``ResourceRequest``)."""

    nnodes: int
    nslots: int
    slot_size: int
    slot_gpus: int
    exclusive: bool
    duration: float


def _summarize(doc: Mapping[str, Any]) -> ResourceSummary:
    state: dict[str, Any] = {
        "nnodes": None,
        "nslots": None,
        "slot_size": None,
        "gpus": 0,
        "exclusive": False,
        "nodefactor": 1,
    }

    def walk(vertices: Sequence[Mapping[str, Any]], factor: int) -> None:
        for vertex in vertices:
            count = parse_count("", vertex.get("count", 1), allow_zero=True)
            rtype, children = vertex.get("type"), vertex.get("with", [])
            if rtype == "node":
                state["nnodes"], state["nodefactor"] = count, factor
                state["exclusive"] |= bool(vertex.get("exclusive", False))
                walk(children, factor)
                continue
            if rtype == "slot":
                state["nslots"] = count
                state["exclusive"] |= bool(vertex.get("exclusive", False))
            elif rtype == "core":
                state["slot_size"] = count.min
            elif rtype == "gpu":
                state["gpus"] = count.min
            walk(children, factor * count.min)

    walk(doc["resources"], 1)
    if state["nslots"] is None:
        raise InvalidJobspec("Unable to determine slot count")
    if state["slot_size"] is None and not state["exclusive"]:
        raise InvalidJobspec("Unable to determine slot size")
    nslots = state["nslots"].min
    nnodes = state["nnodes"].min * state["nodefactor"] if state["nnodes"] else 0
    if state["exclusive"] and not nnodes:
        nnodes, nslots = nslots, 1
    system = doc.get("attributes", {}).get("system") or {}
    return ResourceSummary(
        nnodes=nnodes,
        nslots=nslots * nnodes if nnodes else nslots,
        slot_size=state["slot_size"] or 0,
        slot_gpus=state["gpus"],
        exclusive=state["exclusive"],
        duration=float(system.get("duration") or 0.0),
    )


class Jobspec:
    """A validated jobspec. The underlying document is never mutated."""

    @checked
    def __init__(self, doc: Mapping[str, Any], *, v1: bool = True) -> None:
        # JSON's values only, and bounded, before anything recursive meets it
        check_data(doc, "jobspec", error=InvalidJobspec, json=True)
        validate(doc, v1)
        self._doc: dict[str, Any] = copy.deepcopy(dict(doc))
        self.v1 = v1

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc)

    def to_json(self) -> str:
        return json.dumps(self._doc, sort_keys=False)

    @property
    def version(self) -> int:
        return int(self._doc["version"])

    @property
    def attributes(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc["attributes"])

    @property
    def system(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc["attributes"].get("system") or {})

    @property
    def command(self) -> list[str]:
        """argv of the first task, exactly as given."""
        return list(self._doc["tasks"][0]["command"])

    @property
    def duration(self) -> float:
        return float(self.system.get("duration") or 0.0)

    @property
    def environment(self) -> dict[str, str | None]:
        return dict(self.system.get("environment") or {})

    @property
    def cwd(self) -> str | None:
        return self.system.get("cwd")

    def summary(self) -> ResourceSummary:
        return _summarize(self._doc)

    @property
    def nnodes(self) -> int:
        return self.summary().nnodes

    @property
    def nslots(self) -> int:
        return self.summary().nslots

    @property
    def cores_per_slot(self) -> int:
        return self.summary().slot_size

    @property
    def gpus_per_slot(self) -> int:
        return self.summary().slot_gpus

    @property
    def exclusive(self) -> bool:
        return self.summary().exclusive

    @property
    def ntasks(self) -> int:
        """Total task count of the first task (per_slot * slots, or total)."""
        count = self._doc["tasks"][0]["count"]
        if "total" in count:
            return int(count["total"])
        summary = self.summary()
        if "per_slot" in count:
            return int(count["per_slot"]) * summary.nslots
        per = count["per_resource"]
        if per["type"] == "node":
            return int(per["count"]) * max(summary.nnodes, 1)
        if per["type"] == "core":
            return int(per["count"]) * summary.nslots * summary.slot_size
        return int(per["count"]) * summary.nslots

    def __repr__(self) -> str:
        return f"Jobspec(version={self.version}, command={self.command!r})"


@checked
def load(source: str | bytes | Mapping[str, Any], *, v1: bool = True) -> Jobspec:
    """Parse (YAML or JSON text, or a mapping) and validate a jobspec.

    ``v1=True`` applies RFC 25 V1 rules (flux job-ingest's default),
    ``v1=False`` canonical RFC 14. Failures raise :class:`InvalidJobspec`.
    """
    if isinstance(source, Mapping):
        doc: Any = source
    else:
        try:
            documents = load_all(source if isinstance(source, str) else source.decode(), "jobspec")
        except (InputError, UnicodeDecodeError) as err:
            raise InvalidJobspec(f"jobspec: {err}") from None
        if len(documents) > 1:
            raise InvalidJobspec(f"jobspec: expected one document, found {len(documents)}")
        doc = documents[0] if documents else None
        if doc is None:
            raise InvalidJobspec("jobspec: the document is empty; write a Flux jobspec (RFC 25)")
    if not isinstance(doc, Mapping):
        kinds = {
            list: "a list",
            str: "text",
            bool: "true/false",
            int: "a number",
            float: "a number",
        }
        what = kinds.get(type(doc), type(doc).__name__)
        raise InvalidJobspec(
            f"jobspec: a jobspec is a mapping (version, resources, tasks, attributes), not {what}"
        )
    return Jobspec(doc, v1=v1)


def submittable(text: str, source: str) -> Jobspec:
    """The jobspec in ``text`` (YAML or JSON), as a Flux instance's job-ingest
    takes it: V1 (RFC 25), its default. One that is only canonical (RFC 14)
    is refused saying so; every failure names ``source`` (e.g. ``-f FILE``)."""
    try:
        return load(text)
    except InvalidJobspec as err:
        reason = str(err).removeprefix("jobspec: ")
        try:
            load(text, v1=False)
        except InvalidJobspec:
            raise InvalidJobspec(f"{source}: {reason}") from None
        raise InvalidJobspec(
            f"{source} is a canonical jobspec (RFC 14) but not V1 (RFC 25), the version "
            f"flux job-ingest takes: {reason}"
        ) from None


def _attribute_path(key: str) -> list[str]:
    key = key.lstrip("^")
    if key.startswith("."):
        key = "attributes" + key
    elif not key.startswith(("system.", "user.", "attributes.")):
        key = "system." + key
    if not key.startswith("attributes."):
        key = "attributes." + key
    parts = key.split(".")[1:]
    if any(part == "" for part in parts):
        raise InvalidJobspec(f"attribute key {key!r} has an empty component")
    return parts


def _attribute_value(raw: str, from_file: bool) -> Any:
    if from_file:
        try:
            with open(raw, encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError) as err:
            raise InvalidJobspec(f"cannot read JSON attribute value from {raw}: {err}") from None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@checked
def set_attribute(attributes: dict[str, Any], keyval: str) -> dict[str, Any]:
    """Apply one ``flux run --setattr KEY[=VALUE]`` to an attributes mapping.

    Keys without a ``system.``/``user.``/``.``/``attributes.`` prefix go under
    ``system.``; dots nest; the value is JSON when it parses, else a string;
    no ``=VALUE`` means the integer 1; a leading ``^`` reads JSON from a file.
    Returns ``attributes`` (mutated in place).
    """
    key, has_value, raw = keyval.partition("=")
    if not key:
        raise InvalidJobspec(f"--setattr {keyval!r}: missing key")
    value = _attribute_value(raw, key.startswith("^")) if has_value else 1
    parts = _attribute_path(key)
    node = attributes
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: depth + 1])
            raise InvalidJobspec(
                f"--setattr {key}: {where} is already set to {child!r}, not a table; "
                "use only the sub-keys"
            )
        node = child
    node[parts[-1]] = value
    return attributes


@checked
def from_command(
    command: Sequence[str],
    *,
    ntasks: int | None = None,
    nodes: int | None = None,
    cores_per_task: int = 1,
    gpus_per_task: int = 0,
    duration: float = 0.0,
    exclusive: bool = False,
    environment: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Jobspec:
    """The V1 jobspec ``flux run [-N nodes] [-n ntasks] [-c] [-g] [-x] CMD`` builds."""
    if not command:
        raise InvalidJobspec("a job needs a command")
    if ntasks is None:
        ntasks = nodes or 1
    if ntasks < 1 or cores_per_task < 1 or gpus_per_task < 0:
        raise InvalidJobspec("ntasks and cores per task must be >= 1, gpus per task >= 0")
    if exclusive and not nodes:
        raise InvalidJobspec("exclusive allocation (-x) requires a node count (-N)")
    if nodes is not None and (nodes < 1 or nodes > ntasks):
        raise InvalidJobspec(f"node count {nodes} must be between 1 and the task count {ntasks}")
    children: list[dict[str, Any]] = [{"type": "core", "count": cores_per_task}]
    if gpus_per_task:
        children.append({"type": "gpu", "count": gpus_per_task})
    task_count: dict[str, int] = {"per_slot": 1}
    if nodes:
        slot = {
            "type": "slot",
            "count": math.ceil(ntasks / nodes),
            "with": children,
            "label": "task",
        }
        node: dict[str, Any] = {"type": "node", "count": nodes}
        if exclusive:
            node["exclusive"] = True
        node["with"] = [slot]
        resources = [node]
        if ntasks % nodes:
            task_count = {"total": ntasks}
    else:
        resources = [{"type": "slot", "count": ntasks, "with": children, "label": "task"}]
    system: dict[str, Any] = {"duration": float(duration)}
    if environment is not None:
        system["environment"] = dict(environment)
    if cwd is not None:
        system["cwd"] = cwd
    doc = {
        "resources": resources,
        "tasks": [{"command": list(command), "slot": "task", "count": task_count}],
        "attributes": {"system": system},
        "version": 1,
    }
    return Jobspec(doc, v1=True)
