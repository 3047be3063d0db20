"""The rules a Flux jobspec must satisfy: RFC 14 (canonical) and, with
``v1=True``, RFC 25 (V1, what flux-core's ``job-ingest`` enforces), checked
the way flux-core's Python ``Jobspec``/``JobspecV1`` classes check them.
:func:`validate` raises :class:`InvalidJobspec` naming the path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluxhop.errors import IdsetError, InvalidJobspec
from fluxhop.flux import idset
from fluxhop.flux.limits import MAX_CORES_PER_NODE, MAX_GPUS_PER_NODE, MAX_SECONDS, MAX_TASKS

__all__ = ["Count", "parse_count", "validate"]


# per parent vertex (a slot's cores, a node's GPUs): the most any node has
_MOST = {
    "core": (MAX_CORES_PER_NODE, "the most cores any node has"),
    "gpu": (MAX_GPUS_PER_NODE, "the most GPUs any node has"),
    "slot": (MAX_TASKS, "a task per core of the most nodes a MiniCluster has"),
}
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
class Count:
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


def parse_count(path: str, count: Any, *, allow_zero: bool) -> Count:
    if _is_int(count):
        if count < 0 or (count == 0 and not allow_zero):
            _fail(path, f"count must be >= {0 if allow_zero else 1}, got {count}")
        return Count(count, count)
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
        return Count(count["min"], count.get("max"))
    if isinstance(count, str):
        match = _RANGE_RE.fullmatch(count)
        if match and (match.group("max") or match.group("plus") or match.group("operand")):
            low = int(match.group("min"))
            high = int(match.group("max")) if match.group("max") else None
            operand = int(match.group("operand")) if match.group("operand") else None
            operator = match.group("operator") or ("+" if operand is not None else None)
            _check_range(path, low, high, operand, operator)
            return Count(low, high)
        try:
            ids = idset.decode(count)
        except IdsetError:
            ids = []
        if not ids or ids[0] < 1:
            _fail(path, f"count {count!r} is not a positive integer, RFC 45 range or idset")
        return Count(ids[0], ids[-1])
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
    count = parse_count(
        f"{path}.count", vertex["count"], allow_zero=rtype not in ("node", "slot", "core")
    )
    most, why = _MOST.get(rtype, (None, ""))
    if most is not None and max(count.min, count.max or 0) > most:
        _fail(f"{path}.count", f"a {rtype} count past {most}, {why}")
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
    duration = system.get("duration", 0)
    if not _is_number(duration) or not 0 <= duration <= MAX_SECONDS:  # NaN fails too
        _fail(f"{path}.duration", f"must be a number of seconds from 0 to {MAX_SECONDS}")
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


def validate(doc: Any, v1: bool) -> None:
    if not isinstance(doc, Mapping):
        _fail("", "a jobspec must be a mapping")
    if "version" not in doc:
        _fail("", "jobspec has no version")
    # the version first: another version's jobspec has other keys
    version = doc["version"]
    if not _is_int(version) or version < 1:
        _fail("version", "must be an integer >= 1")
    if v1 and version != 1:
        _fail("version", f"a V1 jobspec (RFC 25) has version 1, not {version}; write it as V1")
    for key in ("resources", "tasks", "attributes"):
        if key not in doc:
            _fail("", f"jobspec has no {key}")
    unknown = set(doc) - {"version", "resources", "tasks", "attributes"}
    if unknown:
        _fail("", f"unknown top-level key {sorted(unknown)[0]!r}")
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
