"""Prometheus metrics read from the Flux instance this runs in.

Shipped into the lead broker's pod and run inside the instance (FLUX_URI set):

    flux python metrics.py --port 9090     # serve GET /metrics
    flux python metrics.py --once          # print Prometheus text once
    flux python metrics.py --once --json   # print the same numbers as JSON

Python 3.6+, the standard library and Flux's own bindings only. Every number
comes from the RPC the matching flux command uses, so they agree:

    brokers       resource.status (flux resource status) and overlay.health
                  (flux overlay status) for the ranks that were lost
    nodes/cores/gpus  resource.sched-status (flux resource list)
    nodes_drain   resource.status drain (flux resource status -s drain)
    jobs, queue_jobs, jobs_result  job-list.job-stats (flux jobs --stats)
    pending_*, jobs_held  job-list.list over pending jobs (flux jobs), and
                  job-info.lookup of their jobspec for GPUs (cached per job)

A scrape reads Flux; a failed read is a 500 with one line and the server
keeps serving. Nothing secret is read.
"""

# ruff: noqa: UP006, UP035, UP045 - Python 3.6 has no dict[...] or X | None in hints

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Dict, List, Optional

# flux-core's own bindings: there where this runs, absent where mypy checks it
import flux.constants  # type: ignore[import-not-found,unused-ignore]  # binds flux: flux.Flux
from flux.idset import IDset  # type: ignore[import-not-found,unused-ignore]
from flux.job import JobKVSLookup, job_list  # type: ignore[import-not-found,unused-ignore]
from flux.resource import resource_list  # type: ignore[import-not-found,unused-ignore]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TIMEOUT = 10.0  # seconds a scrape waits for any one RPC

# dict key -> (HELP text, label names); the metric is flux_<key>, all gauges
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
        "Drained nodes: drained (idle) and draining (still allocated), as flux resource status",
        ("state",),
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
]
JOB_STATES = ("depend", "priority", "sched", "run", "cleanup", "inactive")
RESULTS = (
    ("completed", "successful"),
    ("failed", "failed"),
    ("canceled", "canceled"),
    ("timeout", "timeout"),
)

Metrics = Dict[str, Any]


def _get(future: Any) -> Any:
    """The result of an RPC, waiting at most TIMEOUT (then OSError ETIMEDOUT)."""
    return future.wait_for(TIMEOUT).get()


def _subtree(node: Dict[str, Any]) -> List[int]:
    ranks = [node["rank"]]
    for child in node.get("children", []):
        ranks.extend(_subtree(child))
    return ranks


def _lost_ranks(handle: Any, online: IDset) -> IDset:
    """Ranks behind an overlay link whose status is "lost", as `flux overlay
    status` shows them: ask every online internal broker for its children."""
    topology = _get(handle.rpc("overlay.topology", {"rank": 0}, nodeid=0))
    subtrees = {}  # type: Dict[int, List[int]]
    internal = []  # type: List[int]
    todo = [topology]
    while todo:
        node = todo.pop()
        subtrees[node["rank"]] = _subtree(node)
        if node.get("children"):
            internal.append(node["rank"])
            todo.extend(node["children"])
    asks = [handle.rpc("overlay.health", nodeid=rank) for rank in internal if rank in online]
    lost = IDset()
    for ask in asks:
        try:
            health = _get(ask)
        except OSError:  # a broker going away as we ask: its parent will say
            continue
        for child in health.get("children", []):
            if child["status"] == "lost":
                for rank in subtrees.get(child["rank"], [child["rank"]]):
                    lost.set(rank)
    return lost - online


def _count_gpus(resources: List[Dict[str, Any]], factor: int = 1) -> int:
    total = 0
    for resource in resources:
        count = resource.get("count", 1)
        count = count.get("min", 1) if isinstance(count, dict) else count
        if resource.get("type") == "gpu":
            total += factor * count
        total += _count_gpus(resource.get("with", []), factor * count)
    return total


class Collector:
    """Reads the instance; keeps only the GPU count of each pending job
    (jobspecs rarely change) so a scrape looks up new jobs only."""

    def __init__(self) -> None:
        self.gpus_by_job = {}  # type: Dict[int, int]

    def collect(self) -> Metrics:
        handle = flux.Flux()
        pending = job_list(
            handle,
            max_entries=0,
            attrs=["urgency", "nnodes", "ncores"],
            userid=flux.constants.FLUX_USERID_UNKNOWN,
            states=flux.constants.FLUX_JOB_STATE_PENDING,
        )
        stats_rpc = handle.rpc("job-list.job-stats", {}, nodeid=0)
        status_rpc = handle.rpc("resource.status", nodeid=0)
        sched = _get(resource_list(handle))
        status = _get(status_rpc)
        stats = _get(stats_rpc)
        metrics = {}  # type: Metrics
        metrics.update(self._brokers(handle, status))
        metrics.update(self._resources(sched, status))
        metrics.update(self._jobs(stats))
        metrics.update(self._pending(handle, pending.wait_for(TIMEOUT).get_jobs()))
        metrics["ranks"] = self._ranks(sched, status)  # JSON only: for the autoscaler
        return metrics

    @staticmethod
    def _ranks(sched: Any, status: Dict[str, Any]) -> Dict[str, Any]:
        """Which ranks are online and allocated, and each drain's ranks and reason."""
        drains = [
            {"ranks": str(IDset(ranks)), "reason": (entry or {}).get("reason", "")}
            for ranks, entry in sorted((status.get("drain") or {}).items())
        ]
        return {
            "online": str(IDset(status["online"])),
            "allocated": str(sched.allocated.ranks),
            "drain": drains,
        }

    @staticmethod
    def _brokers(handle: Any, status: Dict[str, Any]) -> Metrics:
        size = int(handle.attr_get("size"))
        online = IDset(status["online"])
        lost = _lost_ranks(handle, online)
        offline = max(size - online.count() - lost.count(), 0)
        return {
            "brokers": {"online": online.count(), "offline": offline, "lost": lost.count()},
            "brokers_torpid": IDset(status.get("torpid", "")).count(),
        }

    @staticmethod
    def _resources(sched: Any, status: Dict[str, Any]) -> Metrics:
        states = ("free", "allocated", "down")
        drained = IDset()
        for ranks in status.get("drain", {}):
            drained.add(IDset(ranks))
        allocated = sched.allocated.ranks
        draining = drained & allocated
        return {
            "nodes": {state: sched[state].nnodes for state in states},
            "cores": {state: sched[state].ncores for state in states},
            "gpus": {state: sched[state].ngpus for state in states},
            "nodes_drain": {
                "drained": (drained - draining).count(),
                "draining": draining.count(),
            },
        }

    @staticmethod
    def _jobs(stats: Dict[str, Any]) -> Metrics:
        queues = {}
        for queue in stats.get("queues", []):
            queues[queue["name"]] = {s: queue["job_states"][s] for s in JOB_STATES}
        return {
            "jobs": {state: stats["job_states"][state] for state in JOB_STATES},
            "queue_jobs": queues,
            "jobs_result": {result: stats[key] for result, key in RESULTS},
        }

    def _pending(self, handle: Any, jobs: List[Dict[str, Any]]) -> Metrics:
        waiting = [job for job in jobs if job.get("urgency") != 0]
        ids = [job["id"] for job in waiting]
        new = [jobid for jobid in ids if jobid not in self.gpus_by_job]
        if new:
            lookup = JobKVSLookup(handle, new, keys=["jobspec"])
            for found in lookup.data():
                jobspec = found.get("jobspec") or {}
                self.gpus_by_job[int(found["id"])] = _count_gpus(jobspec.get("resources", []))
        # forget jobs no longer pending; one whose lookup failed is asked again
        self.gpus_by_job = {i: self.gpus_by_job[i] for i in ids if i in self.gpus_by_job}
        nodes = [max(job.get("nnodes", 0), 0) for job in waiting]
        cores = [max(job.get("ncores", 0), 0) for job in waiting]
        return {
            "jobs_held": len(jobs) - len(waiting),
            "pending_nodes": sum(nodes),
            "pending_cores": sum(cores),
            "pending_gpus": sum(self.gpus_by_job.values()),
            "pending_max_nodes": max(nodes, default=0),
            "pending_max_cores": max(cores, default=0),
        }


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_prometheus(metrics: Metrics) -> str:
    """Prometheus text exposition format 0.0.4, one gauge family per key."""
    lines = []  # type: List[str]
    for key, text, labels in FAMILIES:
        name = "flux_" + key
        lines.append("# HELP {} {}".format(name, text.replace("\\", "\\\\")))
        lines.append(f"# TYPE {name} gauge")
        value = metrics[key]
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


class Handler(BaseHTTPRequestHandler):
    collector = Collector()
    timeout = 10  # seconds: the server answers one client at a time; an idle one is dropped

    def do_GET(self) -> None:  # the name http.server calls
        if self.path.split("?", 1)[0] != "/metrics":
            self._reply(404, "text/plain; charset=utf-8", "not found: try /metrics\n")
            return
        try:
            body = to_prometheus(self.collector.collect())
        except Exception as error:  # any failed read: one line, keep serving
            line = f"reading flux failed: {type(error).__name__}: {error}"
            line = " ".join(line.split())
            sys.stderr.write(line + "\n")
            self._reply(500, "text/plain; charset=utf-8", line + "\n")
            return
        self._reply(200, CONTENT_TYPE, body)

    def _reply(self, code: int, content_type: str, body: str) -> None:
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds would flood the pod's log


def serve(port: int, address: str = "") -> None:
    """Answer GET /metrics on address:port until killed (one scrape at a time)."""
    server = HTTPServer((address, port), Handler)
    sys.stderr.write(f"flux metrics on port {server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Prometheus metrics of this Flux instance")
    parser.add_argument("--port", type=int, help="serve GET /metrics on this port")
    parser.add_argument("--address", default="", help="address to bind (default: all)")
    parser.add_argument("--once", action="store_true", help="print the metrics once and exit")
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")
    args = parser.parse_args(argv)
    if args.once:
        try:
            metrics = Collector().collect()
        except Exception as error:
            sys.stderr.write(f"reading flux failed: {type(error).__name__}: {error}\n")
            return 1
        text = json.dumps(metrics, sort_keys=True) + "\n" if args.json else to_prometheus(metrics)
        sys.stdout.write(text)
        return 0
    if args.port is None:
        parser.error("--port is required unless --once")
    serve(args.port, args.address)
    return 0


if __name__ == "__main__":
    sys.exit(main())
