"""Where and how a MiniCluster's pods run on a shared cluster - queue, priority,
topology, node selectors, tolerations, resources, identity, pull settings and
the pod security profile - as CLI flags give them.

Each flag becomes the MiniCluster field that says the same in a file (the
Flux Operator's own field where it has one, Kueue's label or annotation for
Kueue, a ``spec.pod`` extension otherwise), so a file and the flags render
the same bytes. :func:`place` writes them into a MiniCluster document before
it is validated; a value that cannot be right is refused here in one line
naming the flag.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from fluxhop.errors import InputError
from fluxhop.spec.health import place_health
from fluxhop.spec.kueue import PREFERRED_TOPOLOGY, QUEUE_LABEL, REQUIRED_TOPOLOGY
from fluxhop.spec.leadstate import parse_lead_state
from fluxhop.spec.names import dns_label_problem
from fluxhop.spec.quantity import parse_quantity, size_problem
from fluxhop.spec.rules import (
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

__all__ = [
    "EFFECTS",
    "PULL_POLICIES",
    "SECURITY_PROFILES",
    "Placement",
    "parse_selector",
    "parse_toleration",
    "parse_topology",
    "place",
]

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
SECURITY_PROFILES = ("restricted",)


@dataclass(frozen=True)
class Placement:
    """The placement flags of ``run`` and ``create``; None/empty: not given."""

    queue: str | None = None
    priority_class: str | None = None
    topology: str | None = None
    node_selector: tuple[str, ...] = ()
    tolerations: tuple[str, ...] = ()
    memory: str | None = None
    cpu: str | None = None
    pods_per_node: int | None = None
    service_account: str | None = None
    image_pull_secret: str | None = None
    pull_policy: str | None = None
    security: str | None = None
    metrics: bool | None = None
    metrics_namespaces: tuple[str, ...] = ()
    health_checks: tuple[str, ...] = ()  # NAME=COMMAND each
    health_interval: int | None = None
    lead_state: str | None = None  # --lead-state, spec/leadstate.py parses it
    view_volume: str | None = None  # --view-volume: spec.flux.container.volume

    def given(self) -> bool:
        return any(getattr(self, f.name) not in (None, ()) for f in fields(self))

    def pod_only(self) -> list[str]:
        """The fields given that only pods take: every one but ``cpu``, which
        also gives each rank of a local MiniCluster its cores in R."""
        return [
            f.name
            for f in fields(self)
            if f.name != "cpu" and getattr(self, f.name) not in (None, ())
        ]


def _problem(flag: str, value: str, problem: str | None) -> None:
    if problem:
        raise InputError(f"{flag} {value!r}: {problem}")


def parse_selector(item: str) -> tuple[str, str]:
    """``KEY=VALUE`` for --node-selector (a label key and a label value)."""
    key, sep, value = item.partition("=")
    if not sep:
        raise InputError(f"--node-selector {item!r}: write it as KEY=VALUE (a node label)")
    _problem(
        "--node-selector",
        item,
        qualified_name_problem(key) and f"key {qualified_name_problem(key)}",
    )
    _problem(
        "--node-selector",
        item,
        label_value_problem(value) and f"value {label_value_problem(value)}",
    )
    return key, value


def parse_toleration(item: str) -> dict[str, str]:
    """``KEY[=VALUE]:EFFECT`` (kubectl taint's spelling) as a toleration: with
    a value it tolerates exactly that taint (Equal), without one any value
    of the key (Exists); an empty key tolerates every taint of the effect."""
    rest, sep, effect = item.rpartition(":")
    if not sep:
        raise InputError(
            f"--toleration {item!r}: write it as KEY[=VALUE]:EFFECT, EFFECT one of "
            + ", ".join(EFFECTS)
        )
    if effect not in EFFECTS:
        raise InputError(
            f"--toleration {item!r}: effect {effect!r} is not one of {', '.join(EFFECTS)}"
        )
    key, has_value, value = rest.partition("=")
    if key:
        _problem(
            "--toleration",
            item,
            qualified_name_problem(key) and f"key {qualified_name_problem(key)}",
        )
    elif has_value:
        raise InputError(f"--toleration {item!r}: a value needs a key (KEY=VALUE:EFFECT)")
    if has_value:
        _problem(
            "--toleration",
            item,
            label_value_problem(value) and f"value {label_value_problem(value)}",
        )
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {**({"key": key} if key else {}), "operator": "Exists", "effect": effect}


def parse_topology(item: str) -> tuple[str, bool]:
    """``[required:|preferred:]LEVEL`` (a node label key); preferred by default."""
    mode, sep, level = item.partition(":")
    if not sep or mode not in ("required", "preferred"):
        mode, level = "preferred", item
    problem = qualified_name_problem(level)
    if problem:
        raise InputError(
            f"--topology {item!r}: the level must be a node label key such as "
            f"kubernetes.io/hostname; it {problem}"
        )
    return level, mode == "required"


def _quantity(flag: str, value: str, resource: str) -> str:
    try:
        amount = parse_quantity(value)
    except ValueError as err:
        raise InputError(f"{flag} {value!r}: {err}") from None
    if amount <= 0:
        raise InputError(f"{flag} {value!r}: must be more than 0")
    problem = size_problem(resource, amount)
    if problem:
        raise InputError(f"{flag} {value}: {problem}")
    return value


def _lead(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The document's Flux container (runFlux, else the only container)."""
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return None
    marked = [c for c in containers if isinstance(c, dict) and c.get("runFlux") is True]
    if marked:
        return marked[0]
    first = containers[0]
    return first if len(containers) == 1 and isinstance(first, dict) else None


def _section(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    if not isinstance(value, dict):
        raise InputError(f"{key} must be a mapping to take the placement flags")
    return value


def _check_names(placement: Placement) -> None:
    if placement.queue is not None:
        _problem("--queue", placement.queue, dns_label_problem(placement.queue))
    for flag, value in (
        ("--priority-class", placement.priority_class),
        ("--service-account", placement.service_account),
        ("--image-pull-secret", placement.image_pull_secret),
    ):
        if value is not None:
            _problem(flag, value, dns_subdomain_problem(value))
    if placement.pods_per_node is not None and placement.pods_per_node < 1:
        raise InputError(f"--pods-per-node must be 1 or more, not {placement.pods_per_node}")
    if placement.pull_policy is not None and placement.pull_policy not in PULL_POLICIES:
        raise InputError(
            f"--pull-policy {placement.pull_policy!r} is not one of {', '.join(PULL_POLICIES)}"
        )
    for namespace in placement.metrics_namespaces:
        _problem("--metrics-namespace", namespace, dns_label_problem(namespace))
    if placement.security is not None and placement.security not in SECURITY_PROFILES:
        raise InputError(
            f"--security {placement.security!r} is not one of {', '.join(SECURITY_PROFILES)}"
        )


def place(document: dict[str, Any], placement: Placement) -> dict[str, Any]:
    """A copy of the MiniCluster ``document`` with ``placement`` written in."""
    _check_names(placement)
    doc = copy.deepcopy(document)
    if not placement.given():
        return doc
    meta, spec = _section(doc, "metadata"), _section(doc, "spec")
    pod = _section(spec, "pod")
    if placement.queue is not None:
        _section(meta, "labels")[QUEUE_LABEL] = placement.queue
    if placement.priority_class is not None:
        pod["priorityClassName"] = placement.priority_class
    if placement.topology is not None:
        level, required = parse_topology(placement.topology)
        annotations = _section(pod, "annotations")
        annotations.pop(PREFERRED_TOPOLOGY if required else REQUIRED_TOPOLOGY, None)
        annotations[REQUIRED_TOPOLOGY if required else PREFERRED_TOPOLOGY] = level
    for item in placement.node_selector:
        key, value = parse_selector(item)
        _section(pod, "nodeSelector")[key] = value
    if placement.tolerations:
        existing = pod.get("tolerations") or []
        pod["tolerations"] = [*existing, *(parse_toleration(t) for t in placement.tolerations)]
    if placement.pods_per_node is not None:
        pod["podsPerNode"] = placement.pods_per_node
    if placement.service_account is not None:
        pod["serviceAccountName"] = placement.service_account
    if placement.security is not None:
        pod["securityProfile"] = placement.security
    if placement.metrics is not None:
        _section(spec, "metrics")["enabled"] = placement.metrics
    if placement.metrics_namespaces:
        metrics = _section(spec, "metrics")
        metrics["namespaces"] = [*(metrics.get("namespaces") or []), *placement.metrics_namespaces]
    place_health(spec, placement.health_checks, placement.health_interval)
    if placement.lead_state is not None:
        spec["leadState"] = parse_lead_state(placement.lead_state)
    if placement.view_volume is not None:
        _section(_section(spec, "flux"), "container")["volume"] = placement.view_volume
    _place_container(spec, placement)
    return doc


def _place_container(spec: dict[str, Any], placement: Placement) -> None:
    container_flags = (
        placement.memory,
        placement.cpu,
        placement.image_pull_secret,
        placement.pull_policy,
    )
    if all(value is None for value in container_flags):
        return
    lead = _lead(spec)
    if lead is None:
        raise InputError(
            "--memory, --cpu, --image-pull-secret and --pull-policy need one container with "
            "runFlux: true in the file"
        )
    resources = _section(lead, "resources")
    if placement.memory is not None:
        memory = _quantity("--memory", placement.memory, "memory")
        _section(resources, "requests")["memory"] = memory
        _section(resources, "limits")["memory"] = memory
    if placement.cpu is not None:
        _section(resources, "requests")["cpu"] = _quantity("--cpu", placement.cpu, "cpu")
    if placement.image_pull_secret is not None:
        lead["imagePullSecret"] = placement.image_pull_secret
    if placement.pull_policy is not None:
        lead["imagePullPolicy"] = placement.pull_policy
        lead["pullAlways"] = False


def with_option_flags(document: dict[str, Any], words: Sequence[str]) -> dict[str, Any]:
    """A copy of ``document`` whose ``spec.flux.optionFlags`` ends with ``words``
    (flux job options given on the command line for a file's job)."""
    doc = copy.deepcopy(document)
    flux = _section(_section(doc, "spec"), "flux")
    existing = flux.get("optionFlags")
    before = shlex.split(existing) if isinstance(existing, str) else []
    flux["optionFlags"] = shlex.join([*before, *words])
    return doc
