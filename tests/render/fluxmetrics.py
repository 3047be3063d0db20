"""A real Flux test instance for the metrics exporter, and the numbers its
own commands (flux jobs, flux resource list/status, flux overlay status) give,
in the exporter's JSON shape, to compare against."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from fluxhop.flux.idset import encode
from fluxhop.render.scripts import HEALTH_JOB_PREFIX, HEALTH_KVS_DIR, LEAD_KVS_DIR
from fluxhop.spec.health import REASON_PREFIX
from fluxhop.workload.autoscale import DRAIN_REASON
from tests.conformance import REPO
from tests.processes import default_signals
from tests.realflux import flux_prefix

__all__ = [
    "EXPORTER", "EXPORTER_FILES", "Instance", "flatten", "from_commands", "parse", "wait_until",
]  # fmt: skip

EXPORTER = REPO / "src" / "fluxhop" / "render" / "templates" / "metrics.py"
EXPORTER_FILES = sorted(EXPORTER.parent.glob("metrics*.py"))  # metrics.py and what it imports
STATES = ("depend", "priority", "sched", "run", "cleanup", "inactive")
QUEUES = ("batch", "debug")
CONFIG = """
[resource]
path = "{R}"
noverify = true

[queues.batch]
[queues.debug]

[policy.jobspec.defaults.system]
queue = "batch"
"""
# the scheduler as fluxhop's broker config sets it (flux/broker.py)
FLUXION = """
[sched-fluxion-qmanager]
queue-policy = "easy"
"""
SCHED_SIMPLE = """
[modules.alternatives]
sched = "sched-simple"
feasibility = "sched-simple"
"""


def constant(name: str) -> Any:
    """A module-level constant of the exporter's files (they import flux,
    which the test's Python has not: read from their source)."""
    for path in EXPORTER_FILES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and [
                t.id for t in node.targets if isinstance(t, ast.Name)
            ] == [name]:
                return ast.literal_eval(node.value)
    raise KeyError(name)


def threads(pid: int) -> set[int]:
    """The threads of process ``pid`` (their IDs, /proc): the exporter's, held
    by its clients. IDs, not a count: a thread that served an earlier request
    may still be ending, and a count taken then is off by it."""
    return {int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()}


def flux_binary() -> str:
    return str(flux_prefix() / "bin" / "flux")


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """Poll until condition() is truthy (it reads Flux: no guessed sleeps)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Instance:
    """``flux start --test-size=N`` with fake hosts fake[0-N), 4 cores and
    2 GPUs each (a configured R, not verified), queues batch and debug; the
    instance outlives a broker that leaves (--test-exit-mode=leader). Its
    scheduler is Fluxion (where installed) with fluxhop's queue policy, or
    sched-simple with ``simple``."""

    def __init__(self, size: int = 2, *, simple: bool = False) -> None:
        self.flux = flux_binary()
        self.tmp = Path(tempfile.mkdtemp(prefix="fh-", dir="/tmp"))  # short socket paths
        hosts = f"fake[0-{size - 1}]"
        encode = ["R", "encode", f"--ranks=0-{size - 1}", "--cores=0-3", "--gpus=0-1"]
        R = subprocess.run(
            [self.flux, *encode, f"--hosts={hosts}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (self.tmp / "R.json").write_text(R)
        conf = self.tmp / "conf"
        conf.mkdir()
        config = CONFIG.format(R=self.tmp / "R.json") + (SCHED_SIMPLE if simple else FLUXION)
        (conf / "test.toml").write_text(config)
        test = [f"--test-size={size}", f"--test-hosts={hosts}", "--test-exit-mode=leader"]
        shell = ["sh", "-c", 'echo "$FLUX_URI"; exec sleep 3600']
        self.process = subprocess.Popen(
            [self.flux, "start", *test, f"--config-path={conf}", *shell],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            preexec_fn=default_signals,
            env={**os.environ, "TMPDIR": str(self.tmp)},
        )
        assert self.process.stdout is not None
        self.uri = self.process.stdout.readline().strip()
        if not self.uri:
            self.stop()
            raise RuntimeError(f"flux start exited with {self.process.wait()}")
        self.env = {**os.environ, "FLUX_URI": self.uri}
        self("queue", "start", "--all")  # configured queues start stopped

    def __call__(self, *args: str, check: bool = True) -> str:
        """Run a flux command in the instance; its stdout."""
        result = subprocess.run(
            [self.flux, *args], env=self.env, capture_output=True, text=True, timeout=120
        )
        if check and result.returncode != 0:
            raise AssertionError(f"flux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def exporter(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.flux, "python", str(EXPORTER), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def metrics(self) -> dict[str, Any]:
        """--once --json, checked against --once (Prometheus text) read just after."""
        once = self.exporter("--once", "--json")
        assert once.returncode == 0, once.stderr
        numbers = json.loads(once.stdout)
        text = self.exporter("--once")
        assert text.returncode == 0, text.stderr
        assert parse(text.stdout) == flatten(numbers)
        return numbers

    def submit(self, *args: str) -> str:
        return self("submit", *args).strip()

    def wait_state(self, jobid: str, state: str) -> None:
        """Until `flux jobs` (job-list, which the exporter reads too) shows it."""
        if state == "INACTIVE":
            self("job", "wait-event", "-t", "60", jobid, "clean")
        wait_until(
            lambda: self("jobs", "-n", "-o", "{state}", jobid).strip() == state,
            f"job {jobid} {state}",
        )

    def stop(self) -> None:
        """flux shutdown (a SIGTERM to flux start would orphan its brokers),
        then SIGKILL to whatever is left."""
        if self.process.poll() is None:
            try:
                self("shutdown", "--quiet", check=False)
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _number(text: str) -> int:
    return int(text) if text.strip() else 0  # flux jobs leaves unknown counts blank


def _ranks(idset: str) -> set[int]:
    ranks: set[int] = set()
    for part in idset.strip("[]").split(","):
        first, _, last = part.partition("-")
        ranks.update(range(int(first), int(last or first) + 1))
    return ranks


def _idset(ranks: set[int]) -> str:
    """RFC 22 form, as Flux's IDset prints it."""
    return encode(sorted(ranks))


def _overlay(flux: Instance) -> dict[str, int]:
    """Brokers from `flux overlay status`: the root answers (online); a child
    line's status says connected (full/partial/degraded), lost or offline."""
    lines = flux("overlay", "status", "--no-pretty", "--color=never").splitlines()
    counts = Counter({"online": 0, "offline": 0, "lost": 0})
    for number, line in enumerate(lines):
        status = re.search(r":\s+(\w+)", line)
        assert status, line
        if number == 0 or status.group(1) in ("full", "partial", "degraded"):
            counts["online"] += 1
        else:
            counts[status.group(1)] += 1
    return dict(counts)


CAUSES = ("health", "autoscale", "other")


def _cause(reason: str) -> str:
    if reason.startswith(REASON_PREFIX):
        return "health"
    return "autoscale" if reason == DRAIN_REASON else "other"


def _health(flux: Instance, online: set[int]) -> dict[str, Any]:
    """What each rank's health runner left in the KVS, as flux kvs shows it."""
    listed = flux("kvs", "ls", "-1", HEALTH_KVS_DIR, check=False).split()
    counts: dict[str, dict[str, int]] = {}
    failing: dict[str, dict[int, str]] = {}
    for name in sorted(listed):
        if not name.isdigit() or int(name) not in online:
            continue
        results = json.loads(flux("kvs", "get", f"{HEALTH_KVS_DIR}.{name}"))
        for check, (status, line) in results.items():
            counts.setdefault(check, {"pass": 0, "fail": 0})["pass" if status == 0 else "fail"] += 1
            if status != 0:
                failing.setdefault(check, {})[int(name)] = line
    details = {
        check: {"failing": _idset(set(ranks)), "line": ranks[min(ranks)]}
        for check, ranks in failing.items()
    }
    return {"health_checks": counts, "health": details}


def _lead(flux: Instance) -> dict[str, Any]:
    """rank 0's restarts from spec.leadState's kept state, as flux kvs shows them."""
    restarts = flux("kvs", "get", f"{LEAD_KVS_DIR}.restarts", check=False).strip()
    last = flux("kvs", "get", f"{LEAD_KVS_DIR}.last", check=False).strip()
    count = int(restarts) if restarts.isdigit() and last else 0
    return {"lead_restarts": count, "lead": {"restarts": count, "last": last if count else ""}}


def from_commands(flux: Instance, pending_gpus: int) -> dict[str, Any]:
    """The exporter's numbers as the flux commands show them (GPUs asked for
    by pending jobs: flux jobs has no such column, so the test says)."""
    status = {}
    for state in ("online", "offline", "torpid", "drained", "draining"):
        # online and offline qualify the other states: a line each, so the ranks
        listed = flux("resource", "status", "-n", "-s", state, "-o", "{ranks}").split()
        status[state] = len(set().union(*map(_ranks, listed)))
    resources = {}
    for line in flux(
        "resource",
        "list",
        "-n",
        "-s",
        "free,allocated,down",
        "-o",
        "{state} {nnodes} {ncores} {ngpus}",
    ).splitlines():
        state, *counts = line.split()
        assert state not in resources, "one line per state"
        resources[state] = [int(count) for count in counts]
    jobs = [
        line.split("|")
        for line in flux(
            "jobs",
            "-A",
            "-a",
            "-n",
            "-o",
            "{state}|{queue}|{result}|{urgency}|{nnodes}|{ncores}|{ranks}|{name}",
        ).splitlines()
    ]
    # the jobs of active health checks: counted by state, never as demand or use
    checks = [job for job in jobs if job[7].startswith(HEALTH_JOB_PREFIX)]
    checking = [job for job in checks if job[0] in ("RUN", "CLEANUP")]
    stats = jobs
    jobs = [job for job in jobs if job not in checks]
    pending = [job for job in jobs if job[0] in ("DEPEND", "PRIORITY", "SCHED")]
    waiting = [job for job in pending if job[3] != "0"]
    nodes = [_number(job[4]) for job in waiting]
    cores = [_number(job[5]) for job in waiting]
    sched = [job for job in waiting if job[0] == "SCHED"]  # waiting for resources
    running = [job for job in jobs if job[0] in ("RUN", "CLEANUP")]
    sched_nodes = [_number(job[4]) for job in sched]
    sched_cores = [_number(job[5]) for job in sched]
    brokers = _overlay(flux)
    assert brokers["online"] == status["online"], "overlay and resource status agree"
    online = flux("resource", "status", "-n", "-s", "online", "-o", "{ranks}").split()
    allocated = flux("resource", "list", "-n", "-s", "allocated", "-o", "{ranks}").strip()
    drains = [
        line.split(" ", 1)
        for line in flux("resource", "drain", "-n", "-o", "{ranks} {reason}").splitlines()
    ]
    draining = set().union(
        *map(_ranks, flux("resource", "status", "-n", "-s", "draining", "-o", "{ranks}").split())
    )
    by_reason = {state: dict.fromkeys(CAUSES, 0) for state in ("drained", "draining")}
    for ranks, reason in drains:
        cause = _cause(reason.strip())
        for rank in _ranks(ranks):
            by_reason["draining" if rank in draining else "drained"][cause] += 1
    return {
        "ranks": {
            "online": _idset(set().union(*map(_ranks, online))),
            "allocated": allocated,
            "drain": sorted(
                ({"ranks": ranks, "reason": reason.strip()} for ranks, reason in drains),
                key=lambda d: d["ranks"],
            ),
        },
        "brokers": brokers,
        "brokers_torpid": status["torpid"],
        "nodes": {state: counts[0] for state, counts in resources.items()},
        "cores": {state: counts[1] for state, counts in resources.items()},
        "gpus": {state: counts[2] for state, counts in resources.items()},
        "nodes_drain": {"drained": status["drained"], "draining": status["draining"]},
        "nodes_drain_by_reason": by_reason,
        **_health(flux, set().union(*map(_ranks, online))),
        **_lead(flux),
        "jobs": {state: sum(job[0].lower() == state for job in stats) for state in STATES},
        "queue_jobs": {
            queue: {
                state: sum(job[0].lower() == state and job[1] == queue for job in stats)
                for state in STATES
            }
            for queue in QUEUES
        },
        "jobs_result": {
            result: sum(job[2].lower() == result for job in stats)
            for result in ("completed", "failed", "canceled", "timeout")
        },
        "jobs_held": len(pending) - len(waiting),
        "pending_nodes": sum(nodes),
        "pending_cores": sum(cores),
        "pending_gpus": pending_gpus,
        "pending_max_nodes": max(nodes, default=0),
        "pending_max_cores": max(cores, default=0),
        "sched": {
            "nodes": sum(sched_nodes),
            "cores": sum(sched_cores),
            "max_nodes": max(sched_nodes, default=0),
            "max_cores": max(sched_cores, default=0),
            "allocated": _idset(set().union(*(_ranks(job[6]) for job in running))),
            "checking": _idset(set().union(*(_ranks(job[6]) for job in checking))),
        },
    }


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Prometheus text through prometheus-client's parser: every family a
    documented gauge named flux_*; the samples by name and labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("flux_") and family.type == "gauge", family
        assert family.documentation, f"{family.name} has no HELP"
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


LABELS = {"brokers": "state", "nodes": "state", "cores": "state", "gpus": "state"}
LABELS.update({"jobs": "state", "jobs_result": "result"})
PAIRS = {"queue_jobs": ("queue", "state"), "nodes_drain_by_reason": ("state", "reason")}
PAIRS["health_checks"] = ("check", "result")


def flatten(numbers: dict[str, Any]) -> Samples:
    """The JSON numbers as the samples the text should hold."""
    samples: Samples = {}
    for key, value in numbers.items():
        # JSON only (the autoscaler's, fluxhop status's), not served; the
        # drain totals are served by reason
        if key in ("ranks", "sched", "health", "lead", "nodes_drain"):
            continue
        name = "flux_nodes_drain" if key == "nodes_drain_by_reason" else f"flux_{key}"
        if key in PAIRS:
            first_label, second_label = PAIRS[key]
            for first, inner in value.items():
                for second, count in inner.items():
                    labels = tuple(sorted(((first_label, first), (second_label, second))))
                    samples[(name, labels)] = count
        elif isinstance(value, dict):
            for label, count in value.items():
                samples[(name, ((LABELS[key], label),))] = count
        else:
            samples[(name, ())] = value
    return samples
