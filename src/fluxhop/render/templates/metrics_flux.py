"""The numbers of the Flux instance metrics.py runs in, each from the RPC
the matching flux command uses (metrics.py says which), read at most once
at a time by its Collector."""

# ruff: noqa: UP006, UP035 - Python 3.6 has no dict[...] or X | None in hints

from typing import Any, Dict, List

import flux.constants  # type: ignore[import-not-found,unused-ignore]  # binds flux: flux.Flux
import flux.kvs  # type: ignore[import-not-found,unused-ignore]
from flux.idset import IDset  # type: ignore[import-not-found,unused-ignore]
from flux.job import JobKVSLookup, job_list  # type: ignore[import-not-found,unused-ignore]
from flux.resource import resource_list  # type: ignore[import-not-found,unused-ignore]
from metrics_text import Metrics  # type: ignore[import-not-found,unused-ignore]  # a sibling where it runs

TIMEOUT = 10.0  # seconds a scrape waits for any one RPC
# spec.health's active checks run as jobs of this name (render/templates/health.sh)
# on idle nodes: neither demand for nodes nor a use of them
HEALTH_JOB_PREFIX = "fluxhop-health-"
# drains told apart in flux_nodes_drain{reason}: health's (health.sh) and the
# autoscaler's (workload/autoscale.py); tests hold these equal to fluxhop's
HEALTH_REASON_PREFIX = "health: "
AUTOSCALE_REASON = "fluxhop autoscale: scaling down"
DRAIN_CAUSES = ("health", "autoscale", "other")
HEALTH_KVS_DIR = "fluxhop.health"  # each rank's runner writes its results here
LEAD_KVS_DIR = "fluxhop.lead"  # restarts, last: rank 0's restarts from its kept state
JOB_STATES = ("depend", "priority", "sched", "run", "cleanup", "inactive")
RESULTS = (
    ("completed", "successful"),
    ("failed", "failed"),
    ("canceled", "canceled"),
    ("timeout", "timeout"),
)


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


def _drain_cause(reason: str) -> str:
    if reason.startswith(HEALTH_REASON_PREFIX):
        return "health"
    return "autoscale" if reason == AUTOSCALE_REASON else "other"


def _health(handle: Any, online: IDset) -> Metrics:
    """spec.health's last results on the online ranks: health_checks, ranks
    by result of each check, and (JSON only, for fluxhop status) health, each
    check's failing ranks and the first line of the lowest one's failure.
    Each rank's runner writes its own key when a result changes (one local
    lookup a rank here: a scrape of 1,000 ranks reads 1,000 small values)."""
    counts = {}  # type: Dict[str, Dict[str, int]]
    failing = {}  # type: Dict[str, Dict[int, str]]
    listed = {}  # type: Dict[str, Any]
    try:
        directory = flux.kvs.get_dir(handle, HEALTH_KVS_DIR)
        names = list(directory)
    except OSError:  # nothing written yet (ENOENT), or not a MiniCluster with checks
        names = []
    for name in names:
        try:
            listed[name] = directory[name]
        except (OSError, KeyError, ValueError):  # gone meanwhile, or not ours to read
            continue
    for name, results in sorted(listed.items()):
        if not name.isdigit() or int(name) not in online or not isinstance(results, dict):
            continue
        for check, result_line in sorted(results.items()):
            if not isinstance(result_line, list) or len(result_line) != 2:
                continue
            status, line = result_line
            result = "pass" if status == 0 else "fail"
            counts.setdefault(check, {"pass": 0, "fail": 0})[result] += 1
            if status != 0:
                failing.setdefault(check, {})[int(name)] = str(line)
    details = {}  # type: Dict[str, Dict[str, str]]
    for check, ranks in failing.items():
        first = min(ranks)
        details[check] = {"failing": str(IDset(",".join(map(str, ranks)))), "line": ranks[first]}
    return {"health_checks": counts, "health": details}


def _lead(handle: Any) -> Metrics:
    """spec.leadState: how often rank 0 restarted the instance from its kept
    state, and when last (JSON only), as its entrypoint counts them."""
    try:
        directory = flux.kvs.get_dir(handle, LEAD_KVS_DIR)
        restarts, last = int(directory["restarts"]), str(directory["last"])
    except (OSError, KeyError, ValueError, TypeError):  # never restarted
        restarts, last = 0, ""
    return {"lead_restarts": restarts, "lead": {"restarts": restarts, "last": last}}


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
        # pending and running jobs in one answer of job-list: one snapshot, so a
        # job just scheduled is never both pending and on its ranks ("sched")
        active = job_list(
            handle,
            max_entries=0,
            attrs=["urgency", "nnodes", "ncores", "state", "ranks", "name"],
            userid=flux.constants.FLUX_USERID_UNKNOWN,
            states=flux.constants.FLUX_JOB_STATE_PENDING | flux.constants.FLUX_JOB_STATE_RUNNING,
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
        listed = active.wait_for(TIMEOUT).get_jobs()
        jobs = [j for j in listed if not str(j.get("name", "")).startswith(HEALTH_JOB_PREFIX)]
        checking = IDset()  # ranks a health check's job runs on: no use, but a shrink waits
        for job in listed:
            if job not in jobs and not job.get("state", 0) & flux.constants.FLUX_JOB_STATE_PENDING:
                checking.add(IDset(job.get("ranks") or ""))
        pending = [j for j in jobs if j.get("state", 0) & flux.constants.FLUX_JOB_STATE_PENDING]
        metrics.update(self._pending(handle, pending))
        running = [j for j in jobs if not j.get("state", 0) & flux.constants.FLUX_JOB_STATE_PENDING]
        busy = IDset()
        for job in running:
            busy.add(IDset(job.get("ranks") or ""))
        metrics["sched"]["allocated"] = str(busy)
        metrics["sched"]["checking"] = str(checking)
        metrics["ranks"] = self._ranks(sched, status)  # JSON only: for the autoscaler
        metrics.update(_health(handle, IDset(status["online"])))
        metrics.update(_lead(handle))
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
        by_reason = {state: {c: 0 for c in DRAIN_CAUSES} for state in ("drained", "draining")}
        for ranks, entry in status.get("drain", {}).items():
            cause = _drain_cause((entry or {}).get("reason") or "")
            ids = IDset(ranks)
            busy = (ids & allocated).count()
            by_reason["draining"][cause] += busy
            by_reason["drained"][cause] += ids.count() - busy
        return {
            "nodes_drain_by_reason": by_reason,
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
        # JSON only, for the autoscaler: the jobs that wait for resources (SCHED),
        # not for a dependency or a begin time (DEPEND, PRIORITY)
        sched = [j for j in waiting if j.get("state") == flux.constants.FLUX_JOB_STATE_SCHED]
        sched_nodes = [max(job.get("nnodes", 0), 0) for job in sched]
        sched_cores = [max(job.get("ncores", 0), 0) for job in sched]
        return {
            "sched": {
                "nodes": sum(sched_nodes),
                "cores": sum(sched_cores),
                "max_nodes": max(sched_nodes, default=0),
                "max_cores": max(sched_cores, default=0),
            },
            "jobs_held": len(jobs) - len(waiting),
            "pending_nodes": sum(nodes),
            "pending_cores": sum(cores),
            "pending_gpus": sum(self.gpus_by_job.values()),
            "pending_max_nodes": max(nodes, default=0),
            "pending_max_cores": max(cores, default=0),
        }
