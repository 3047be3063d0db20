"""Prometheus metrics read from the Flux instance this runs in.

Shipped into the lead broker's pod and run inside the instance (FLUX_URI set):

    flux python metrics.py --port 9090     # serve GET /metrics (and /metrics.json)
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
                  job-info.lookup of their jobspec for GPUs (cached per job);
                  the jobs of spec.health's active checks are no demand
    nodes_drain{reason}  the drains' reasons: health (spec.health), autoscale, other
    health_checks  spec.health's last results, each rank's runner's in the KVS
                  (fluxhop.health.<rank>: {check: [status, first line]})

A scrape reads Flux; a failed read is a 500 with one line and the server
keeps serving. Nothing secret is read.

/metrics.json also carries a ``version`` of the queue that moves with the
job manager's journal; ``?after=VERSION&wait=SECONDS`` answers once it has
moved (or the seconds have passed), so fluxhop's operator hears of a new
pending job at once instead of polling (``version`` is null where the
flux-core has no journal to follow: then it answers at once). At most
MAX_WAITERS such waits are held at once (more are answered at once), and
a wait ends when its client goes, so a flood of them holds no thread for
long. It listens on IPv6 and IPv4 (dual stack) where the pod has IPv6.
"""

# ruff: noqa: UP006, UP035, UP045 - Python 3.6 has no dict[...] or X | None in hints

import argparse
import contextlib
import json
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import parse_qs

# flux-core's own bindings: there where this runs, absent where mypy checks it
import flux.constants  # type: ignore[import-not-found,unused-ignore]  # binds flux: flux.Flux
import flux.kvs  # type: ignore[import-not-found,unused-ignore]
from flux.idset import IDset  # type: ignore[import-not-found,unused-ignore]
from flux.job import JobKVSLookup, job_list  # type: ignore[import-not-found,unused-ignore]
from flux.resource import resource_list  # type: ignore[import-not-found,unused-ignore]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TIMEOUT = 10.0  # seconds a scrape waits for any one RPC
LISTED_TIMEOUT = 2.0  # seconds the journal's follower waits for job-list to list a job
MAX_WAITERS = 64  # long polls held at once (one per operator replica and autoscaler is the use)
WAIT_SLICE = 1.0  # seconds a long poll waits between looks at whether its client is still there
LONGEST_WAIT = 300.0  # seconds a long poll is held at most
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


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_prometheus(metrics: Metrics) -> str:
    """Prometheus text exposition format 0.0.4, one gauge family per key."""
    lines = []  # type: List[str]
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


class Changes:
    """A version of the queue that moves on each job event that can change
    what an autoscaler decides (the job manager's journal): a job waiting
    for resources, a job's resources freed, a job's urgency. A reader waits
    for it to move (``GET /metrics.json?after=VERSION&wait=SECONDS``) rather
    than asking again and again. A job that starts waiting moves it only once
    job-list, where the numbers come from, lists it as pending."""

    EVENTS = ("priority", "free", "urgency")

    def __init__(self) -> None:
        self.boot = f"{int(time.time() * 1000):x}"  # a restarted exporter: a new version
        self.count = 0
        self.following = False
        self.changed = threading.Condition()
        self.waiters = threading.BoundedSemaphore(MAX_WAITERS)

    @property
    def version(self) -> str:
        return f"{self.boot}-{self.count}"

    def ensure(self) -> None:
        """Follow the journal, if not yet: at a reader's request, since the
        exporter starts before the broker it reads (a failed start is tried
        again at the next request). Call with ``changed`` held."""
        if self.following:
            return
        try:
            from flux.job import JournalConsumer  # type: ignore[import-not-found,unused-ignore]
        except ImportError:  # a flux-core older than its journal: readers poll instead
            return
        try:
            handle = flux.Flux()
            consumer = JournalConsumer(handle, full=False).start()
        except Exception:  # the broker is not up yet: a later request tries again
            return
        self.following = True
        self.count += 1  # what happened while not following is not known: a new version
        threading.Thread(target=self._follow, args=(handle, consumer), daemon=True).start()

    def _follow(self, handle: Any, consumer: Any) -> None:
        try:
            while True:
                event = consumer.poll(timeout=-1.0)
                if event is None:
                    break
                if event.name not in self.EVENTS:
                    continue
                if event.name == "priority":  # now SCHED: once job-list has it so
                    _listed(handle, event.jobid)
                with self.changed:
                    self.count += 1
                    self.changed.notify_all()
        except Exception as error:  # say it; the next reader starts following again
            sys.stderr.write(f"following the job journal failed: {error}\n")
        with self.changed:
            self.following = False
            self.changed.notify_all()

    def wait(
        self, after: Optional[str], seconds: float, gone: Callable[[], bool] = lambda: False
    ) -> Optional[str]:
        """The version once it is not ``after`` (or ``seconds`` have passed);
        None where the journal cannot be followed (then at once). With
        MAX_WAITERS already waiting it answers at once; it stops waiting
        (and answers GONE) once ``gone()`` says the client has left."""
        seconds = max(0.0, min(seconds, LONGEST_WAIT))
        held = seconds > 0 and self.waiters.acquire(blocking=False)
        deadline = time.monotonic() + (seconds if held else 0.0)
        try:
            with self.changed:
                self.ensure()
                while self.following and after == self.version:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.changed.wait(min(left, WAIT_SLICE))
                    if gone():
                        return GONE
                return self.version if self.following else None
        finally:
            if held:
                self.waiters.release()


GONE = "\0gone"  # Changes.wait's answer for a client that left while it waited


def _gone(connection: socket.socket) -> bool:
    """Whether the client has closed its end (readable, with nothing to read)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _listed(handle: Any, jobid: int) -> None:
    """Wait until job-list sees ``jobid`` pending or past it (job-list wakes
    a waiter on a state in its mask: a job that goes on to RUN within one of
    its updates never shows SCHED, so every later state is in the mask too)."""
    states = flux.constants
    mask = (
        states.FLUX_JOB_STATE_SCHED
        | states.FLUX_JOB_STATE_RUN
        | states.FLUX_JOB_STATE_CLEANUP
        | states.FLUX_JOB_STATE_INACTIVE
    )
    payload = {"id": int(jobid), "attrs": ["state"], "state": mask}
    with contextlib.suppress(OSError):  # gone, or slow: the next change or look has it
        handle.rpc("job-list.list-id", payload).wait_for(LISTED_TIMEOUT).get()


class Reads:
    """One read of Flux at a time (the collector keeps a cache), and one for
    all who asked while it waited its turn: a request takes the numbers of a
    read that started after it asked, so a flood of requests costs two reads,
    not one each, and no answer is older than its question."""

    def __init__(self) -> None:
        self.collector = Collector()
        self.lock = threading.Lock()
        self.last: Optional[Metrics] = None
        self.started = 0.0  # when the read that gave ``last`` began

    def numbers(self, asked: float) -> Metrics:
        with self.lock:
            if self.last is None or self.started < asked:
                started = time.monotonic()
                self.last, self.started = self.collector.collect(), started
            return dict(self.last)


class Handler(BaseHTTPRequestHandler):
    reads = Reads()
    changes = Changes()
    timeout = 10  # seconds an idle client may hold a connection

    def do_GET(self) -> None:  # the name http.server calls
        path, _, query = self.path.partition("?")
        if path not in ("/metrics", "/metrics.json"):
            self._reply(404, "text/plain; charset=utf-8", "not found: try /metrics\n")
            return
        version = None
        if path == "/metrics.json":
            asked = parse_qs(query)
            try:
                seconds = float(asked.get("wait", ["0"])[-1])
            except ValueError:
                seconds = 0.0
            version = self.changes.wait(
                asked.get("after", [None])[-1], seconds, lambda: _gone(self.connection)
            )
            if version == GONE:
                return  # nobody to answer: the thread ends now
        try:
            metrics = self.reads.numbers(asked=time.monotonic())
        except Exception as error:  # any failed read: one line, keep serving
            line = f"reading flux failed: {type(error).__name__}: {error}"
            line = " ".join(line.split())
            sys.stderr.write(line + "\n")
            self._reply(500, "text/plain; charset=utf-8", line + "\n")
            return
        if path == "/metrics.json":  # what --once --json prints, and the version: the operator's
            metrics["version"] = version
            self._reply(200, "application/json", json.dumps(metrics, sort_keys=True) + "\n")
            return
        self._reply(200, CONTENT_TYPE, to_prometheus(metrics))

    def _reply(self, code: int, content_type: str, body: str) -> None:
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds would flood the pod's log


class Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True  # a reader waiting for a change never holds up a scrape
    # the listen backlog: http.server's 5 drops most of a flood's connections,
    # whose clients then try again seconds later (the kernel caps it at somaxconn)
    request_queue_size = 1024


class DualStackServer(Server):
    """IPv6 and, through IPv4-mapped addresses, IPv4 on one socket."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        with contextlib.suppress(AttributeError, OSError):
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def make_server(port: int, address: str = "") -> Server:
    """Every address (IPv6 too, where the pod has it), or the one given."""
    if address in ("", "::"):
        try:
            return DualStackServer(("::", port), Handler)
        except OSError:  # no IPv6 in this pod (e.g. disable_ipv6): IPv4 alone
            if address == "::":
                raise
    if ":" in address:
        return DualStackServer((address, port), Handler)
    return Server((address, port), Handler)


def serve(port: int, address: str = "") -> None:
    """Answer GET /metrics and /metrics.json on address:port until killed."""
    server = make_server(port, address)
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
