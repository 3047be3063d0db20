"""A container's environment and argv, as the kubelet and runtime make them.

Pure functions over the pod as the API server returns it, plus what the
kubelet knows (the pod's IP, the ConfigMaps and Secrets it fetched). The
rules are the kubelet's: ``env`` in order, each value expanded against the
variables defined before it (``$(VAR)``, ``$$`` for a literal ``$``, an
unknown reference left as it is), ``envFrom`` before ``env``, and
``command``/``args`` expanded against the whole environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

__all__ = ["IMAGE_PATH", "EnvError", "container_env", "expand", "field_value", "resource_value"]

# What an image's config would put on PATH (the host filesystem stands in for images).
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_REFERENCE = re.compile(r"\$(\$|\(([^)]*)\))")
_LABEL_OR_ANNOTATION = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")
_SUFFIX = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": Decimal("0.001"),
}


class EnvError(Exception):
    """A reference the kubelet could not resolve: the container does not start."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        name = match.group(2)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(one, text)


def field_value(path: str, pod: dict[str, Any]) -> str:
    """The value of a downward API ``fieldRef.fieldPath``."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    match = _LABEL_OR_ANNOTATION.fullmatch(path)
    if match:
        return (meta.get(match.group(1)) or {}).get(match.group(2), "")
    values = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace", "default"),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIPs": ",".join(ip["ip"] for ip in status.get("podIPs") or []),
        "status.hostIPs": ",".join(ip["ip"] for ip in status.get("hostIPs") or []),
    }
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    if path not in values:
        raise EnvError(f"fieldRef {path!r} is not supported")
    return values[path]


def _quantity(text: str) -> Decimal:
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    if not match or match.group(2) not in _SUFFIX:
        raise EnvError(f"quantity {text!r} is not understood")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2)]


def resource_value(
    ref: dict[str, Any], container: dict[str, Any], node_allocatable: dict[str, str]
) -> str:
    """``resourceFieldRef``: a limit (the node's allocatable when unset) or a
    request, divided by the divisor and rounded up, as the kubelet does."""
    resource = ref["resource"]
    kind, _, name = resource.partition(".")
    resources = container.get("resources") or {}
    value = (resources.get(kind) or {}).get(name)
    if value is None:
        value = node_allocatable.get(name, "0") if kind == "limits" else "0"
    divisor = _quantity(ref.get("divisor") or "1")
    return str(int((_quantity(value) / divisor).to_integral_value(ROUND_CEILING)))


def container_env(
    container: dict[str, Any],
    pod: dict[str, Any],
    lookup: Callable[[str, str, str | None], dict[str, str] | None],
    node_allocatable: dict[str, str],
    base: Mapping[str, str],
) -> dict[str, str]:
    """The container's environment: ``base`` (what the image and runtime
    set), then ``envFrom``, then ``env``. ``lookup(kind, name, key)`` returns
    a ConfigMap's or Secret's data (decoded), or None where it does not exist."""
    env = dict(base)
    for source in container.get("envFrom") or []:
        kind = "ConfigMap" if "configMapRef" in source else "Secret"
        ref = source.get("configMapRef") or source.get("secretRef") or {}
        data = lookup(kind, ref["name"], None)
        if data is None:
            if ref.get("optional"):
                continue
            raise EnvError(f'{kind.lower()} "{ref["name"]}" not found')
        prefix = source.get("prefix", "")
        env.update({prefix + key: value for key, value in data.items()})
    for var in container.get("env") or []:
        value = _one(var, env, container, pod, lookup, node_allocatable)
        if value is not None:  # a missing optional key leaves the variable unset
            env[var["name"]] = value
    return env


def _one(
    var: dict[str, Any],
    env: dict[str, str],
    container: dict[str, Any],
    pod: dict[str, Any],
    lookup: Callable[[str, str, str | None], dict[str, str] | None],
    node_allocatable: dict[str, str],
) -> str | None:
    source = var.get("valueFrom")
    if source is None:
        return expand(str(var.get("value", "")), env)
    if "fieldRef" in source:
        return field_value(source["fieldRef"]["fieldPath"], pod)
    if "resourceFieldRef" in source:
        return resource_value(source["resourceFieldRef"], container, node_allocatable)
    for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        if key in source:
            ref = source[key]
            data = lookup(kind, ref["name"], ref["key"])
            if data is None or ref["key"] not in data:
                if ref.get("optional"):
                    return None
                raise EnvError(f"couldn't find key {ref['key']} in {kind} {ref['name']}")
            return data[ref["key"]]
    raise EnvError(f"env {var['name']}: valueFrom {sorted(source)} is not supported")
