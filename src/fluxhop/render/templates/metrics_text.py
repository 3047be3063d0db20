"""The metrics in Prometheus's text exposition format (0.0.4): every family
metrics.py serves, its HELP text and labels."""

# ruff: noqa: UP006, UP035 - Python 3.6 has no dict[...] or X | None in hints

from typing import Any, Dict, List

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Metrics = Dict[str, Any]  # the numbers, keyed as FAMILIES (and SOURCES) name them

# (name, HELP text, label names): the metric is flux_<name>, all gauges, its
# numbers metrics[name], or metrics[SOURCES[name]] where the JSON keeps the name
# for numbers of the shape before (totals: what older fluxhop reads)
FAMILIES = [
    (
        "brokers",
        "Brokers by state: online (resource status), lost (overlay status: "
        "went away without a clean shutdown, with the subtree behind them), offline (the rest)",
        ("state",),
    ),
    ("brokers_torpid", "Online brokers not heard from lately (flux resource status -s torpid)", ()),
    (
        "nodes",
        "Nodes by state as flux resource list counts them (a node partly allocated "
        "is free and allocated; down includes drained)",
        ("state",),
    ),
    ("cores", "Cores by state as flux resource list counts them", ("state",)),
    ("gpus", "GPUs by state as flux resource list counts them", ("state",)),
    (
        "nodes_drain",
        "Drained nodes: drained (idle) and draining (still allocated), as flux resource status, "
        "by reason: health (spec.health's checks), autoscale (a scale-down), other",
        ("state", "reason"),
    ),
    ("jobs", "Jobs by state (flux jobs --stats)", ("state",)),
    ("queue_jobs", "Jobs by queue and state (configured queues only)", ("queue", "state")),
    ("jobs_result", "Inactive jobs by result (falls when inactive jobs are purged)", ("result",)),
    ("jobs_held", "Pending jobs held (urgency 0), left out of the pending requests", ()),
    (
        "pending_nodes",
        "Nodes asked for by pending jobs not held (a job that names no node count adds 0)",
        (),
    ),
    ("pending_cores", "Cores asked for by pending jobs not held (whole-node requests add 0)", ()),
    ("pending_gpus", "GPUs asked for by pending jobs not held (from their jobspec)", ()),
    ("pending_max_nodes", "The largest node request among pending jobs not held", ()),
    ("pending_max_cores", "The largest core request among pending jobs not held", ()),
    (
        "health_checks",
        "Online ranks by each health check's last result there: pass or fail (spec.health)",
        ("check", "result"),
    ),
    (
        "lead_restarts",
        "Times rank 0 restarted the instance from its kept state (spec.leadState)",
        (),
    ),
]
SOURCES = {"nodes_drain": "nodes_drain_by_reason"}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_prometheus(metrics: Metrics) -> str:
    """Prometheus text exposition format 0.0.4, one gauge family per key."""
    lines: List[str] = []
    for key, text, labels in FAMILIES:
        name = "flux_" + key
        lines.append("# HELP {} {}".format(name, text.replace("\\", "\\\\")))
        lines.append(f"# TYPE {name} gauge")
        value = metrics[SOURCES.get(key, key)]
        if not labels:
            lines.append(f"{name} {value}")
            continue
        for first, inner in sorted(value.items()):
            pairs = inner.items() if len(labels) == 2 else [(None, inner)]
            for second, number in pairs:
                values = (first, second)
                text_labels = ",".join(
                    f'{label}="{_label(str(values[i]))}"' for i, label in enumerate(labels)
                )
                lines.append(f"{name}{{{text_labels}}} {number}")
    return "\n".join(lines) + "\n"
