"""The reference pages, generated from the code so that they cannot drift:
the CLI (from the click commands), the MiniCluster fields (from the spec
model: type, default, and whether fluxhop implements, warns about or refuses
each, against the Flux Operator's field), and the Rabbit attributes (from the
parser's own table). docs/hooks.py puts them into the site at build time;
tests/test_docs.py checks that nothing is left out."""

from __future__ import annotations

import importlib
import types
import typing
from dataclasses import dataclass
from typing import Any

import click
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticUndefined

__all__ = ["Row", "cli_page", "commands", "minicluster_page", "minicluster_rows", "rabbit_page"]

# --- the CLI ---------------------------------------------------------------------------


def commands() -> list[tuple[str, click.Command]]:
    """Every command, as "fluxhop VERB [SUB]", loaded from the lazy registry."""
    from fluxhop.cli.app import VERBS

    found = []
    for name in sorted(VERBS):
        verb = VERBS[name]
        command = getattr(importlib.import_module(verb.module), verb.command)
        found.append((f"fluxhop {name}", command))
        if isinstance(command, click.Group):
            for sub in sorted(command.commands):
                found.append((f"fluxhop {name} {sub}", command.commands[sub]))
    return found


def _option_row(param: click.Parameter) -> list[str]:
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    if isinstance(param, click.Option) and param.is_flag:
        kind = "flag"
    elif isinstance(param.type, click.Choice):
        kind = " \\| ".join(str(c) for c in param.type.choices)
    else:
        kind = (getattr(param, "metavar", None) or param.type.name).replace("|", "\\|")
    default = param.default if not callable(param.default) else None
    unset = default in (None, False, (), []) or type(default).__name__ == "Sentinel"
    shown = "" if unset else f"`{default}`"
    help_text = (getattr(param, "help", None) or "").replace("|", "\\|").replace("\n", " ")
    return [names, kind, shown, help_text]


def cli_page() -> str:
    lines = [
        "# CLI reference",
        "",
        "Generated from the click commands; `fluxhop VERB --help` says the same.",
        "",
    ]
    for title, command in commands():
        ctx = click.Context(command, info_name=title)
        lines += [f"## `{title}`", "", (command.help or "").strip(), ""]
        lines += ["```", command.get_usage(ctx).replace("Usage: ", ""), "```", ""]
        options = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
        if options:
            lines += ["| option | takes | default | what it does |", "|---|---|---|---|"]
            lines += ["| " + " | ".join(_option_row(p)) + " |" for p in options]
            lines.append("")
    return "\n".join(lines)


# --- MiniCluster fields ----------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    path: str  # wire path: spec.containers[].image
    type: str
    default: str
    status: str  # implemented | fluxhop extension | warned | refused
    note: str
    opaque: bool = False  # a mapping or Kubernetes type: its keys are not listed


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (typing.Union, types.UnionType):
        inner = [_type(a) for a in args if a is not type(None)]
        return " or ".join(inner)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"map of {_type(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    name = getattr(annotation, "__name__", str(annotation))
    return _NAMES.get(name, name)


_NAMES = {
    "str": "string",
    "int": "integer",
    "bool": "boolean",
    "float": "number",
    "Any": "any",
    "SecretStr": "string (secret)",
}


def _default(field: Any) -> str:
    if field.default is PydanticUndefined:
        return "required" if field.default_factory is None else "empty"
    if field.default is None:
        return ""
    return f"`{field.default}`"


def _core(annotation: Any) -> Any:
    """Without Annotated[...] and Optional[...]."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _core(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _core(inner[0]) if len(inner) == 1 else annotation
    return annotation


def _walk(model: type[BaseModel], prefix: str, extensions: dict[str, str]) -> list[Row]:
    rows = []
    for name, field in model.model_fields.items():
        wire = field.alias or to_camel(name)
        path = f"{prefix}.{wire}" if prefix else wire
        core = _core(field.annotation)
        origin = typing.get_origin(core)
        nested = _models(core)
        status, note = "implemented", field.description or ""
        if path in extensions:
            status, note = "fluxhop extension", extensions[path]
        inner = _core(typing.get_args(core)[0]) if origin is list else None
        opaque = not nested and (origin is dict or typing.get_origin(inner) is dict)
        rows.append(Row(path, _type(field.annotation), _default(field), status, note, opaque))
        suffix = {list: "[]", dict: ".*"}.get(origin, "")
        for child in nested:
            rows += _walk(child, path + suffix, extensions)
    for key, why in getattr(model, "UNSUPPORTED", {}).items():
        status = "refused" if "v1alpha1" in why else "warned"
        rows.append(Row(f"{prefix}.{key}", "", "", status, why, opaque=True))
    for key, became in getattr(model, "V1ALPHA1", {}).items():
        rows.append(
            Row(f"{prefix}.{key}", "", "", "refused", f"a v1alpha1 field; {became}", opaque=True)
        )
    for key in getattr(model, "TRANSLATED", ()):
        rows.append(
            Row(f"{prefix}.{key}", "", "", "warned", "the old spelling; read as the new field")
        )
    return rows


def extensions() -> dict[str, str]:
    from fluxhop.spec.pod import EXTENSIONS

    notes = {
        "priorityClassName": "the pods' PriorityClass (Kueue reads it too); `--priority-class`",
        "podsPerNode": "1: one broker per node, required; N: spread with skew N; `--pods-per-node`",
        "securityProfile": "`restricted`: every pod passes the Pod Security Standards "
        "restricted level; `--security`",
    }
    found = {f"spec.pod.{key}": notes[key] for key in EXTENSIONS}
    found["spec.flux.networkDevice"] = "the interface the brokers bind (default: all)"
    found["spec.flux.container.volume"] = (
        "how the view reaches the pods: `image` mounts the view image read-only (an image "
        "volume, nothing copied), `copy` copies it in an init container, `auto` (default) "
        "mounts it where every node can (kubelet 1.35+, containerd 2.2+ or CRI-O 1.33+); "
        "`--view-volume`"
    )
    found["spec.metrics"] = (
        "rank 0 serves Prometheus metrics read from Flux ([metrics](../guides/metrics.md))"
    )
    found["spec.metrics.enabled"] = (
        "unset: on when interactive or operated, off for a run; `--metrics/--no-metrics`"
    )
    found["spec.metrics.port"] = "the container port named `metrics`"
    found["spec.autoscale"] = (
        "size the MiniCluster to its Flux queue within minSize-maxSize "
        "([autoscaling](../guides/metrics.md#autoscaling))"
    )
    found["spec.autoscale.scaleDownDelaySeconds"] = "how long nodes stay idle before a shrink"
    found["spec.health"] = (
        "checks that drain a failing node's rank ([health checks](../operations.md#health-checks))"
    )
    found["spec.health.onFailure"] = (
        "`drain`: the failing rank is drained until it passes again; `replace`: its idle pod is "
        "also evicted and its node tainted by fluxhop's operator"
    )
    found["spec.health.maxReplacements"] = "the most ranks being replaced at once (default 1)"
    found["spec.health.checks"] = (
        "the checks: on every broker's node, or as Flux jobs on idle nodes"
    )
    found["spec.health.checks[].name"] = "names the check in drain reasons and results"
    found["spec.health.checks[].command"] = (
        "bash; may call the shipped `fluxhop_gpus`, `fluxhop_disk_free`, `fluxhop_writable`"
    )
    found["spec.health.checks[].kind"] = (
        "`passive`: on every node, every interval; `active`: a Flux job on the nodes no job holds"
    )
    found["spec.health.checks[].intervalSeconds"] = "how often it runs"
    found["spec.health.checks[].timeoutSeconds"] = "a check still running then has failed"
    found["spec.leadState"] = (
        "rank 0 keeps the instance on a claim; a new rank 0 restarts it with its queue "
        "([keep the queue](../operations.md#keep-the-queue-when-rank-0-is-lost)); unset "
        "(interactive): a claim of the default StorageClass where the cluster has one and "
        "the policy of deploy/lead-state.yaml, else an emptyDir"
    )
    found["spec.leadState.claimName"] = "a claim of yours; unset: fluxhop makes one (ReadWriteOnce)"
    found["spec.leadState.storageClassName"] = "the class of fluxhop's claim (unset: the default)"
    found["spec.leadState.size"] = "the size of fluxhop's claim (default 1Gi)"
    found["spec.managedBy"] = (
        "the controller that keeps the resource; another than `fluxhop.io/operator` "
        "(e.g. `kueue.x-k8s.io/multikueue`) and fluxhop operator leaves it alone; immutable"
    )
    found["spec.suspend"] = (
        "hold it: no pods until false (a running one stops); fluxhop operator sets it for a "
        "resource with a Kueue queue until Kueue admits it, and again on an eviction "
        "([queued resources](../guides/operator.md#a-queued-minicluster-is-a-kueue-workload))"
    )
    found["spec.leadState.emptyDir"] = (
        "keep it in an emptyDir: it outlives rank 0's broker, not its pod"
    )
    found["spec.leadState.checkpointSeconds"] = (
        "how often the KVS is written when it changed (default 1): what a lost node may lose"
    )
    found["spec.metrics.namespaces"] = (
        "namespaces whose pods may scrape it, besides its own; `--metrics-namespace`"
    )
    found["spec.containers[].hostPorts"] = (
        "ports published on the pod's node too (hostPort = containerPort), one pod per node; "
        "a rabbit MiniCluster's are NNF's ([rabbits](../guides/rabbit.md))"
    )
    found["spec.pod.tolerations[].tolerationSeconds"] = (
        "Kubernetes' own toleration field, which the Flux Operator's CRD lacks"
    )
    return found


def minicluster_rows() -> list[Row]:
    from fluxhop.spec.minicluster import MiniCluster

    return _walk(MiniCluster, "", extensions())


def minicluster_page() -> str:
    lines = [
        "# MiniCluster fields",
        "",
        "Every field of the Flux Operator's `flux-framework.org/v1alpha2` MiniCluster as",
        "fluxhop reads it, generated from the spec model. **implemented**: fluxhop's pods do",
        "what the Flux Operator's would; **warned**: accepted with a one-line warning and",
        "passed on to the Flux Operator by `--target minicluster`; **refused**: an error that",
        "says what to write instead; **fluxhop extension**: not in the Flux Operator's CRD",
        "(left out of `--target minicluster`, with a warning). The Flux Operator field is",
        "the same path unless the row is an extension.",
        "",
        "| field | type | default | fluxhop | note |",
        "|---|---|---|---|---|",
    ]
    for row in minicluster_rows():
        note = row.note.replace("|", "\\|")
        lines.append(f"| `{row.path}` | {row.type} | {row.default} | {row.status} | {note} |")
    return "\n".join(lines) + "\n"


# --- Rabbit attributes -----------------------------------------------------------------


def rabbit_page() -> str:
    from fluxhop.rabbit.request import ATTRIBUTES

    lines = [
        "# Rabbit attributes (`rabbit.mpi.*`)",
        "",
        "Generated from the parser's own table. `rabbit.mpi` alone takes true/false",
        "(yes/no, 1/0); an unknown key is an error naming the closest one.",
        "",
        "| attribute | takes | default | what it does |",
        "|---|---|---|---|",
    ]
    for key, (takes, default, does) in ATTRIBUTES.items():
        lines.append(f"| `rabbit.mpi.{key}` | {takes} | {default} | {does} |")
    return "\n".join(lines) + "\n"
