"""Flux jobspecs: RFC 14 (canonical) and RFC 25 (V1) validation, plus helpers.

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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluxhop.documents import load_all
from fluxhop.errors import IdsetError, InputError, InvalidJobspec
from fluxhop.flux import idset

__all__ = ["Jobspec", "ResourceSummary", "from_command", "load", "set_attribute"]

_VERTEX_KEYS = {"type", "count", "unit", "exclusive", "with", "label", "id"}
_TASK_KEYS = {"command", "slot", "count", "attributes", "distribution"}
_COUNT_KEYS = {"per_slot", "per_resource", "total"}
_RANGE_RE = re.compile(
    r"(?P<min>[1-9][0-9]*)(?:-(?P<max>[1-9][0-9]*)|(?P<plus>\+))?"
    r"(?::(?P<operand>[1-9][0-9]*)(?::(?P<operator>[-+*^]))?)?"
)


def _fail(path: str, message: str) -> None:
    raise InvalidJobspec(f"{path}: {message}" if path else message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class _Count:
    """A resource count reduced to what scheduling needs: min and max."""

    min: int
    max: int | None


def _check_range(
    path: str, low: int, high: int | None, operand: int | None, operator: str | None
) -> None:
    if (operand is None) != (operator is None):
        _fail(path, "count operator and operand must be given together")
    if operator is not None and operator not in "+*^":
        _fail(path, f"count operator {operator!r} must be one of +, *, ^")
    if operand is not None and operand < 1:
        _fail(path, "count operand must be >= 1")
    if operator in ("*", "^") and operand is not None and operand < 2:
        _fail(path, f"count operand must be >= 2 for operator {operator}")
    if operator == "^" and low < 2:
        _fail(path, "count min must be >= 2 for operator ^")
    if high is not None and high < low:
        _fail(path, f"count max {high} is less than min {low}")


def _parse_count(path: str, count: Any, *, allow_zero: bool) -> _Count:
    if _is_int(count):
        if count < 0 or (count == 0 and not allow_zero):
            _fail(path, f"count must be >= {0 if allow_zero else 1}, got {count}")
        return _Count(count, count)
    if isinstance(count, Mapping):
        unknown = set(count) - {"min", "max", "operator", "operand"}
        if unknown:
            _fail(path, f"unknown count key {sorted(unknown)[0]!r}")
        if "min" not in count:
            _fail(path, "count object needs min")
        for key in ("min", "max", "operand"):
            if key in count and not _is_int(count[key]):
                _fail(path, f"count {key} must be an integer")
        if count["min"] < 1:
            _fail(path, "count min must be >= 1")
        if "operator" in count and not isinstance(count["operator"], str):
            _fail(path, "count operator must be a string")
        _check_range(
            path, count["min"], count.get("max"), count.get("operand"), count.get("operator")
        )
        return _Count(count["min"], count.get("max"))
    if isinstance(count, str):
        match = _RANGE_RE.fullmatch(count)
        if match and (match.group("max") or match.group("plus") or match.group("operand")):
            low = int(match.group("min"))
            high = int(match.group("max")) if match.group("max") else None
            operand = int(match.group("operand")) if match.group("operand") else None
            operator = match.group("operator") or ("+" if operand is not None else None)
            _check_range(path, low, high, operand, operator)
            return _Count(low, high)
        try:
            ids = idset.decode(count)
        except IdsetError:
            ids = []
        if not ids or ids[0] < 1:
            _fail(path, f"count {count!r} is not a positive integer, RFC 45 range or idset")
        return _Count(ids[0], ids[-1])
    _fail(path, f"count must be an integer, range string or object, not {type(count).__name__}")
    raise AssertionError  # pragma: no cover


def _check_vertex(path: str, vertex: Any, v1: bool) -> None:
    if not isinstance(vertex, Mapping):
        _fail(path, "resource vertex must be a mapping")
    unknown = set(vertex) - _VERTEX_KEYS
    if unknown:
        _fail(path, f"unknown resource key {sorted(unknown)[0]!r}")
    for key in ("type", "count"):
        if key not in vertex:
            _fail(path, f"resource vertex has no {key}")
    if not isinstance(vertex["type"], str):
        _fail(f"{path}.type", "must be a string")
    rtype = vertex["type"]
    if v1 and not _is_int(vertex["count"]):
        _fail(f"{path}.count", "V1 resource counts must be integers")
    # flux-core accepts a zero count for anything but node, slot and core (gpu: 0)
    _parse_count(f"{path}.count", vertex["count"], allow_zero=rtype not in ("node", "slot", "core"))
    for key in ("unit", "label", "id"):
        if key in vertex and not isinstance(vertex[key], str):
            _fail(f"{path}.{key}", "must be a string")
    if "exclusive" in vertex and not isinstance(vertex["exclusive"], bool):
        _fail(f"{path}.exclusive", "must be true or false")
    if rtype == "slot":
        if "label" not in vertex:
            _fail(path, "a slot needs a label")
        if "with" not in vertex:
            _fail(path, "a slot needs a with list")
    if "with" in vertex:
        children = vertex["with"]
        if not isinstance(children, list) or not children:
            _fail(f"{path}.with", "must be a non-empty list")
        for index, child in enumerate(children):
            _check_vertex(f"{path}.with[{index}]", child, v1)


def _check_task(path: str, task: Any) -> None:
    if not isinstance(task, Mapping):
        _fail(path, "task must be a mapping")
    unknown = set(task) - _TASK_KEYS
    if unknown:
        _fail(path, f"unknown task key {sorted(unknown)[0]!r}")
    for key in ("command", "slot", "count"):
        if key not in task:
            _fail(path, f"task has no {key}")
    command = task["command"]
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        _fail(f"{path}.command", "must be a non-empty list of strings")
    if not isinstance(task["slot"], str):
        _fail(f"{path}.slot", "must be a string")
    count = task["count"]
    if not isinstance(count, Mapping):
        _fail(f"{path}.count", "must be a mapping with per_slot, per_resource or total")
    keys = set(count)
    if len(keys & _COUNT_KEYS) != 1 or keys - _COUNT_KEYS:
        _fail(f"{path}.count", "needs exactly one of per_slot, per_resource, total")
    for key in ("per_slot", "total"):
        if key in count and (not _is_int(count[key]) or count[key] < 1):
            _fail(f"{path}.count.{key}", "must be an integer >= 1")
    if "per_resource" in count:
        per = count["per_resource"]
        if (
            not isinstance(per, Mapping)
            or not isinstance(per.get("type"), str)
            or not _is_int(per.get("count"))
            or per["count"] < 1
        ):
            _fail(f"{path}.count.per_resource", "must be {type: NAME, count: N >= 1}")
    if "attributes" in task and not isinstance(task["attributes"], Mapping):
        _fail(f"{path}.attributes", "must be a mapping")
    if "distribution" in task and not isinstance(task["distribution"], str):
        _fail(f"{path}.distribution", "must be a string")


def _check_system(system: Mapping[str, Any]) -> None:
    path = "attributes.system"
    if "duration" in system and (not _is_number(system["duration"]) or system["duration"] < 0):
        _fail(f"{path}.duration", "must be a number of seconds >= 0")
    for key in ("environment", "constraints", "job", "files"):
        if key in system and not isinstance(system[key], Mapping):
            _fail(f"{path}.{key}", "must be a mapping")
    for key in ("cwd", "queue", "bank", "project"):
        if key in system and not isinstance(system[key], str):
            _fail(f"{path}.{key}", "must be a string")
    if "environment" in system:
        for name, value in system["environment"].items():
            if value is not None and not isinstance(value, str):
                _fail(f"{path}.environment.{name}", "must be a string or null")
    if "dependencies" in system:
        deps = system["dependencies"]
        if not isinstance(deps, list) or not all(
            isinstance(d, Mapping)
            and isinstance(d.get("scheme"), str)
            and isinstance(d.get("value"), str)
            for d in deps
        ):
            _fail(f"{path}.dependencies", "must be a list of {scheme: STR, value: STR}")
    shell = system.get("shell")
    if shell is not None and (
        not isinstance(shell, Mapping) or not isinstance(shell.get("options", {}), Mapping)
    ):
        _fail(f"{path}.shell.options", "must be a mapping")


def _check_attributes(attributes: Any, v1: bool) -> None:
    if not isinstance(attributes, Mapping):
        _fail("attributes", "must be a mapping with system and/or user")
    unknown = set(attributes) - {"system", "user"}
    if unknown:
        _fail("attributes", f"unknown section {sorted(unknown)[0]!r} (only system and user)")
    for key in ("system", "user"):
        if key in attributes and not isinstance(attributes[key], Mapping):
            _fail(f"attributes.{key}", "must be a mapping")
    system = attributes.get("system")
    if system is not None:
        _check_system(system)
    if v1:
        if system is None:
            _fail("attributes.system", "V1 jobspecs need attributes.system with a duration")
        if "duration" not in system:
            _fail("attributes.system.duration", "is required in a V1 jobspec")


def _check_v1_shape(resources: list[Any], tasks: list[Any]) -> None:
    if len(resources) != 1:
        _fail("resources", "a V1 jobspec has exactly one top-level resource")
    top = resources[0]
    if top["type"] == "node":
        children = top.get("with", [])
        if len(children) != 1 or children[0]["type"] != "slot":
            _fail("resources[0].with", "a V1 node holds exactly one slot")
        slot, slot_path = children[0], "resources[0].with[0]"
    elif top["type"] == "slot":
        slot, slot_path = top, "resources[0]"
    else:
        _fail(
            "resources[0].type", f"V1 top-level resource must be node or slot, not {top['type']!r}"
        )
    leaves = slot.get("with", [])
    types = [leaf["type"] for leaf in leaves]
    if (
        not 1 <= len(leaves) <= 2
        or "core" not in types
        or not set(types) <= {"core", "gpu"}
        or len(set(types)) != len(types)
    ):
        _fail(f"{slot_path}.with", "a V1 slot holds one core vertex and at most one gpu vertex")
    for leaf in leaves:
        if "with" in leaf:
            _fail(f"{slot_path}.with", f"V1 {leaf['type']} vertices have no children")
    if len(tasks) != 1:
        _fail("tasks", "a V1 jobspec has exactly one task")
    if "per_resource" in tasks[0]["count"]:
        _fail("tasks[0].count", "V1 task counts are per_slot or total, not per_resource")


def _validate(doc: Any, v1: bool) -> None:
    if not isinstance(doc, Mapping):
        _fail("", "a jobspec must be a mapping")
    for key in ("version", "resources", "tasks", "attributes"):
        if key not in doc:
            _fail("", f"jobspec has no {key}")
    unknown = set(doc) - {"version", "resources", "tasks", "attributes"}
    if unknown:
        _fail("", f"unknown top-level key {sorted(unknown)[0]!r}")
    version = doc["version"]
    if not _is_int(version) or version < 1:
        _fail("version", "must be an integer >= 1")
    if v1 and version != 1:
        _fail("version", f"a V1 jobspec has version 1, not {version}")
    resources, tasks = doc["resources"], doc["tasks"]
    if not isinstance(resources, list) or not resources:
        _fail("resources", "must be a non-empty list")
    for index, vertex in enumerate(resources):
        _check_vertex(f"resources[{index}]", vertex, v1)
    if not isinstance(tasks, list) or not tasks:
        _fail("tasks", "must be a non-empty list")
    for index, task in enumerate(tasks):
        _check_task(f"tasks[{index}]", task)
    _check_attributes(doc["attributes"], v1)
    if v1:
        _check_v1_shape(resources, tasks)


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
            count = _parse_count("", vertex.get("count", 1), allow_zero=True)
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

    def __init__(self, doc: Mapping[str, Any], *, v1: bool = True) -> None:
        _validate(doc, v1)
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
    return Jobspec(doc, v1=v1)


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
