"""Flux commands inside a running MiniCluster, as plain data: the argv that
runs rank 0's own ``flux`` where its broker is (argv reaches flux word for
word: bash gets the words as positional parameters, never as text to parse),
and what flux's answers mean (``flux jobs --json``, the resource and queue
status). workload/verbs.py puts them together; cluster/inside.py (through
kubectl exec) and local/inside.py (on this machine) say how to get there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fluxhop.errors import InputError
from fluxhop.flux import hostlist, idset
from fluxhop.flux.jobid import f58

__all__ = [
    "BROKER_NOT_STARTED",
    "METRICS_SCRIPT",
    "STATUS_SCRIPT",
    "Broker",
    "InstanceStatus",
    "Job",
    "in_pod",
    "parse_jobs",
    "parse_metrics",
    "parse_status",
    "status_args",
    "submit_args",
]

BROKER_NOT_STARTED = 69  # EX_UNAVAILABLE: the pod runs, its broker is not up yet
METRICS_SCRIPT = "metrics.py"  # its ConfigMap key: in the pods at <config dir>/metrics.py

# $1 is where the pod keeps Flux; the rest is flux's argv. The prelude finds
# rank 0's broker the way `fluxhop shell` does (run/env.sh, written by the
# entrypoint once the broker starts) and asks for ASCII job IDs (fEYkSMn, not ƒEYkSMn).
_PRELUDE = (
    'env_file="$1/run/env.sh"; shift; '
    'if [ ! -f "$env_file" ]; then '
    'echo "fluxhop: the broker has not started in this pod yet" >&2; exit 69; fi; '
    '. "$env_file"; export FLUX_F58_FORCE_ASCII=1; '
)
_OPERATOR_PRELUDE = (
    "shift; . /mnt/flux/flux-view.sh || exit 69; "
    'export FLUX_URI="$fluxsocket" FLUX_F58_FORCE_ASCII=1; flux_bin=flux; '
)
FLUX_SCRIPT = 'exec "$flux_bin" "$@"'
_SECTION = "--- fluxhop ---"
_METRICS_FAILED = "fluxhop: metrics.py exited with status"
# One exec for `fluxhop status`: brokers, resources, queue, and the numbers
# of the instance's metrics.py (render/templates/metrics.py) when $1 names
# it. A MiniCluster made before it and a Flux Operator pod have none: then the
# last section is empty. Its stderr joins its stdout, so that a failure is
# said (parse_metrics) without failing the rest of the status.
STATUS_SCRIPT = (
    '"$flux_bin" resource status -no "{state} {nnodes} {ranks} {nodelist}" && '
    f'echo "{_SECTION}" && '
    '"$flux_bin" resource list -no "{state} {nnodes} {ncores} {ngpus} {ranks} {nodelist}" && '
    f'echo "{_SECTION}" && '
    '"$flux_bin" queue status && '
    f'echo "{_SECTION}" && '
    'if [ -n "${1:-}" ] && [ -f "$1" ]; then '
    f'"$flux_bin" python "$1" --once --json 2>&1 || echo "{_METRICS_FAILED} $?"; fi'
)


def status_args(metrics_script: str | None) -> list[str]:
    """STATUS_SCRIPT's arguments: where rank 0 finds metrics.py, or None for
    a MiniCluster that has none (the status then has no metrics)."""
    return [metrics_script] if metrics_script else []


def in_pod(flux_root: str | None, args: Sequence[str], *, script: str = FLUX_SCRIPT) -> list[str]:
    """``bash -c SCRIPT`` with flux's ``args`` as positional parameters, run
    where rank 0's broker is (``flux_root``; None: a Flux Operator pod)."""
    prelude = _OPERATOR_PRELUDE if flux_root is None else _PRELUDE
    return ["bash", "-c", prelude + script, "fluxhop", flux_root or "-", *args]


def submit_args(
    command: Sequence[str],
    *,
    nodes: int | None = None,
    ntasks: int | None = None,
    cores: int | None = None,
    gpus: int | None = None,
    options: Sequence[str] = (),
    cc: str | None = None,
    watch: bool = False,
) -> list[str]:
    """``flux submit`` arguments; the command follows ``--`` untouched."""
    if not command:
        raise InputError("submit needs a command: fluxhop submit NAME -- CMD ARGS...")
    args = ["submit"]
    for flag, value in (("-N", nodes), ("-n", ntasks), ("-c", cores), ("-g", gpus)):
        if value is not None:
            if value < (0 if flag == "-g" else 1):
                raise InputError(
                    f"{flag} must be {'0' if flag == '-g' else '1'} or more, not {value}"
                )
            args += [flag, str(value)]
    args += list(options)
    if cc is not None:
        try:
            idset.decode(cc)
        except InputError as err:
            raise InputError(f"--cc {cc!r}: {err}") from None
        args += ["--cc", cc]
    if watch:
        args.append("--watch")
    return [*args, "--", *command]


# --- flux's answers ------------------------------------------------------------------

_STATES = {"DEPEND": "D", "PRIORITY": "P", "SCHED": "S", "RUN": "R", "CLEANUP": "C"}
_RESULTS = {"COMPLETED": "CD", "FAILED": "F", "CANCELED": "CA", "TIMEOUT": "TO"}


@dataclass(frozen=True)
class Job:
    """One job of ``flux jobs``."""

    id: str
    user: str
    name: str
    state: str  # flux's state name: SCHED, RUN, INACTIVE...
    result: str | None
    ntasks: int
    nnodes: int
    runtime: float
    nodelist: str
    returncode: int | None

    @property
    def st(self) -> str:
        """The two-letter state of ``flux jobs``' ST column."""
        if self.state == "INACTIVE":
            return _RESULTS.get(self.result or "", "I")
        return _STATES.get(self.state, self.state[:2])

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "name": self.name,
            "state": self.state,
            "result": self.result,
            "ntasks": self.ntasks,
            "nnodes": self.nnodes,
            "runtime": self.runtime,
            "nodelist": self.nodelist,
            "returncode": self.returncode,
        }


def parse_jobs(text: str) -> list[Job]:
    """``flux jobs --json`` output as Jobs."""
    try:
        data = json.loads(text)
        entries = data["jobs"]
    except (ValueError, KeyError, TypeError):
        raise InputError("flux jobs --json did not answer with its JSON document") from None
    jobs = []
    for entry in entries:
        jobs.append(
            Job(
                id=f58(int(entry["id"])),
                user=str(entry.get("username") or entry.get("userid", "")),
                name=str(entry.get("name", "")),
                state=str(entry.get("state", "")),
                result=entry.get("result"),
                ntasks=int(entry.get("ntasks", 0)),
                nnodes=int(entry.get("nnodes", 0) or 0),
                runtime=float(entry.get("runtime", 0.0) or 0.0),
                nodelist=str(entry.get("nodelist", "") or ""),
                returncode=entry.get("returncode"),
            )
        )
    return jobs


@dataclass(frozen=True)
class Broker:
    rank: int
    node: str
    state: str  # avail, drained, exclude, ... with "*" when offline (flux resource status)

    @property
    def up(self) -> bool:
        # flux resource status appends "*" to the state of a broker that is offline
        return not self.state.endswith("*") and self.state not in ("offline", "lost", "exclude")


@dataclass
class InstanceStatus:
    """What ``fluxhop status`` shows: brokers, resources, the queue, and the
    instance's metrics (metrics.py's JSON object as it printed it; None when
    the MiniCluster has no metrics.py, or it failed: ``metrics_error`` says
    how, in one line)."""

    brokers: list[Broker] = field(default_factory=list)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    queue: list[str] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    metrics_error: str | None = None

    @property
    def up(self) -> int:
        return sum(1 for b in self.brokers if b.up)

    @property
    def down(self) -> int:
        return len(self.brokers) - self.up

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokers": {"up": self.up, "down": self.down},
            "ranks": [
                {"rank": b.rank, "node": b.node, "state": b.state, "up": b.up} for b in self.brokers
            ],
            "resources": self.resources,
            "queue": self.queue,
            "metrics": self.metrics,
            "metrics_error": self.metrics_error,
        }


def _fields(line: str, count: int) -> list[str]:
    parts = line.split(" ", count - 1)
    return parts + [""] * (count - len(parts))


# What metrics.py --once --json prints: these keys at least, each a count or
# a map of counts by state (metrics.py's FAMILIES; it may add keys).
_JOB_STATES = ("depend", "priority", "sched", "run", "cleanup", "inactive")
_RESOURCE_STATES = ("free", "allocated", "down")
_METRICS_SHAPE: dict[str, tuple[str, ...]] = {
    "brokers": ("online", "offline", "lost"),
    "brokers_torpid": (),
    "nodes": _RESOURCE_STATES,
    "cores": _RESOURCE_STATES,
    "gpus": _RESOURCE_STATES,
    "nodes_drain": ("drained", "draining"),
    "jobs": _JOB_STATES,
    "jobs_result": ("completed", "failed", "canceled", "timeout"),
    "jobs_held": (),
    "pending_nodes": (),
    "pending_cores": (),
    "pending_gpus": (),
    "pending_max_nodes": (),
    "pending_max_cores": (),
}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shape_problem(data: Any) -> str | None:
    """What metrics.py's answer lacks, or None when it has every number."""
    if not isinstance(data, dict):
        return "a JSON object"
    for key, states in _METRICS_SHAPE.items():
        value = data.get(key)
        if not states:
            if not _count(value):
                return f"a count {key}"
            continue
        if not isinstance(value, dict):
            return f"a map {key}"
        for state in states:
            if not _count(value.get(state)):
                return f"a count {key}.{state}"
    queues = data.get("queue_jobs")
    if not isinstance(queues, dict):
        return "a map queue_jobs"
    for queue, counts in queues.items():
        if not isinstance(counts, dict) or not all(_count(counts.get(s)) for s in _JOB_STATES):
            return f"the counts of queue_jobs.{queue}"
    return None


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_metrics(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """STATUS_SCRIPT's last section: (metrics.py's numbers, None), or (None,
    why not in one line), or (None, None) when the MiniCluster has no
    metrics.py (nothing ran, so nothing to say)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None, None
    failed = [line for line in lines if line.startswith(_METRICS_FAILED)]
    said = [line for line in lines if not line.startswith(_METRICS_FAILED)]
    if failed:  # its last line says why (metrics.py's one line; a traceback's last)
        return None, _one_line(said[-1] if said else failed[-1].removeprefix("fluxhop: "))
    objects = [line for line in said if line.startswith("{")]
    if not objects:
        return None, _one_line(f"metrics.py printed no JSON object: {said[-1]}")
    try:
        data = json.loads(objects[-1])  # anything before it: warnings on its stderr
    except ValueError as err:
        return None, _one_line(f"metrics.py printed malformed JSON: {err}")
    problem = _shape_problem(data)
    if problem is not None:
        return None, f"metrics.py answered without {problem}"
    return data, None


def parse_status(text: str) -> InstanceStatus:
    """The sections STATUS_SCRIPT prints: brokers, resources, queue, metrics
    (three: no metrics section at all, as before metrics.py)."""
    sections = text.split(_SECTION + "\n")
    if len(sections) not in (3, 4):
        raise InputError("the status of the instance came back incomplete")
    brokers_text, resources_text, queue_text = sections[:3]
    status = InstanceStatus()
    for line in brokers_text.splitlines():
        state, _, ranks, nodes = _fields(line.strip(), 4)
        if not ranks:
            continue
        for rank, node in zip(idset.decode(ranks), hostlist.decode(nodes), strict=False):
            status.brokers.append(Broker(rank, node, state))
    status.brokers.sort(key=lambda b: b.rank)
    for line in resources_text.splitlines():
        state, nnodes, ncores, ngpus, ranks, _ = _fields(line.strip(), 6)
        if state:
            status.resources[state] = {
                "nodes": int(nnodes or 0),
                "cores": int(ncores or 0),
                "gpus": int(ngpus or 0),
                "ranks": ranks,
            }
    status.queue = [line.strip() for line in queue_text.splitlines() if line.strip()]
    if len(sections) == 4:
        status.metrics, status.metrics_error = parse_metrics(sections[3])
    return status
