"""The metrics exporter (render/templates/metrics.py) in a real Flux instance:
its numbers are the ones flux jobs, flux resource list/status and flux overlay
status give at each step, its text parses as Prometheus text format, and its
HTTP server answers /metrics, 404s elsewhere and outlives a failed read."""

from __future__ import annotations

import ast
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from fluxhop.render.scripts import HEALTH_JOB_PREFIX, HEALTH_KVS_DIR, LEAD_KVS_DIR
from fluxhop.spec.health import REASON_PREFIX
from fluxhop.workload.autoscale import DRAIN_REASON
from tests.realflux import missing_flux
from tests.realflux.schedulers import Scheduler
from tests.render.fluxmetrics import (
    EXPORTER,
    EXPORTER_FILES,
    Instance,
    constant,
    flatten,
    flux_binary,
    from_commands,
    parse,
    threads,
    wait_until,
)

needs_flux = pytest.mark.skipif(missing_flux() is not None, reason=missing_flux() or "")
MAX_WAITERS = constant("MAX_WAITERS")


@pytest.fixture
def flux(scheduler: Scheduler) -> Iterator[Instance]:
    instance = Instance(size=2, simple=scheduler.simple)
    yield instance
    instance.stop()


def test_the_exporter_is_python_36_and_standalone():
    """Its files use Python 3.6's syntax and import the standard library,
    Flux's bindings and each other only."""
    siblings = {path.stem for path in EXPORTER_FILES}
    for path in EXPORTER_FILES:
        tree = ast.parse(path.read_text(), feature_version=(3, 6))  # no walrus, no 3.7+ syntax
        imported = {
            (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert imported <= set(sys.stdlib_module_names) | {"flux"} | siblings, (path, imported)
        assert "__future__" not in imported


@pytest.mark.flux
@needs_flux
def test_the_numbers_are_the_flux_commands_at_each_step(flux):
    def same(pending_gpus: int = 0) -> dict:
        numbers = flux.metrics()
        assert numbers == from_commands(flux, pending_gpus)
        return numbers

    idle = same()
    assert idle["brokers"] == {"online": 2, "offline": 0, "lost": 0}
    assert idle["nodes"] == {"free": 2, "allocated": 0, "down": 0}
    assert idle["cores"]["free"] == 8 and idle["gpus"]["free"] == 4
    assert sum(idle["jobs"].values()) == 0

    held = flux.submit("--urgency=hold", "-N2", "sleep", "inf")
    flux.wait_state(held, "SCHED")
    numbers = same()
    assert numbers["jobs_held"] == 1 and numbers["pending_nodes"] == 0

    running = flux.submit("-N1", "-n1", "-g1", "sleep", "inf")
    flux.wait_state(running, "RUN")
    numbers = same()
    assert numbers["jobs"]["run"] == 1 and numbers["queue_jobs"]["batch"]["run"] == 1
    assert numbers["cores"]["allocated"] == 1 and numbers["gpus"]["allocated"] == 1

    flux("resource", "drain", "0-1", "metrics test")
    numbers = same()
    assert numbers["nodes_drain"] == {"drained": 1, "draining": 1}
    busy = flux("jobs", "-no", "{ranks}", running).strip()  # the scheduler's choice
    idle = "1" if busy == "0" else "0"
    flux("resource", "undrain", busy)
    numbers = same()
    assert numbers["nodes_drain"] == {"drained": 1, "draining": 0}

    # the idle rank drained: two nodes cannot be had; the busy one has one GPU left, not two
    # (more nodes than exist would not wait: sched-simple fails it, unsatisfiable)
    wide = flux.submit("--queue=debug", "-N2", "hostname")
    gpus = flux.submit("--queue=debug", "-n1", "-g2", "true")
    flux.wait_state(wide, "SCHED")
    flux.wait_state(gpus, "SCHED")
    numbers = same(pending_gpus=2)
    assert numbers["pending_nodes"] == 2 and numbers["pending_max_nodes"] == 2
    assert numbers["pending_cores"] >= 1 and numbers["pending_max_cores"] >= 1
    assert numbers["queue_jobs"]["debug"]["sched"] == 2

    flux("cancel", wide, gpus, held, running)
    flux("resource", "undrain", idle)
    done = [flux.submit("hostname"), flux.submit("false"), flux.submit("-t", "1s", "sleep", "60")]
    for jobid in [wide, gpus, held, running, *done]:
        flux.wait_state(jobid, "INACTIVE")
    numbers = same()
    assert numbers["jobs_result"] == {"completed": 1, "failed": 1, "canceled": 4, "timeout": 1}
    assert numbers["jobs"]["inactive"] == 7 and numbers["pending_max_nodes"] == 0

    flux("overlay", "disconnect", "1")
    wait_until(lambda: "lost" in flux("overlay", "status", "--no-pretty"), "rank 1 lost")
    wait_until(
        lambda: flux("resource", "status", "-n", "-s", "offline", "-o", "{nnodes}").strip() == "1",
        "rank 1 offline",
    )
    numbers = same()
    assert numbers["brokers"] == {"online": 1, "offline": 0, "lost": 1}


@pytest.mark.flux
@needs_flux
def test_a_job_waiting_on_a_dependency_is_pending_but_no_demand_for_nodes(flux):
    running = flux.submit("-N", "1", "sleep", "300")
    flux.wait_state(running, "RUN")
    later = flux.submit("-N", "1", f"--dependency=afterok:{running}", "hostname")
    flux.wait_state(later, "DEPEND")
    numbers = flux.metrics()
    assert numbers == from_commands(flux, 0)
    assert numbers["pending_nodes"] == 1 and numbers["sched"]["nodes"] == 0


@pytest.mark.flux
@needs_flux
def test_the_jobs_of_active_health_checks_are_no_demand_and_no_use(flux):
    assert constant("HEALTH_JOB_PREFIX") == HEALTH_JOB_PREFIX  # the name health.sh gives them
    checking = flux.submit(f"--job-name={HEALTH_JOB_PREFIX}a", "-N", "1", "sleep", "300")
    flux.wait_state(checking, "RUN")
    waiting = flux.submit(f"--job-name={HEALTH_JOB_PREFIX}b", "-N", "2", "hostname")
    flux.wait_state(waiting, "SCHED")
    numbers = flux.metrics()
    assert numbers == from_commands(flux, 0)
    assert numbers["pending_nodes"] == 0 and numbers["sched"]["nodes"] == 0
    assert numbers["sched"]["allocated"] == ""
    # where a check runs: a shrink waits for it (workload/autoscale.py)
    assert numbers["sched"]["checking"] == flux("jobs", "-no", "{ranks}", checking).strip()
    assert numbers["jobs"]["run"] == 1  # still a job of the instance's


@pytest.mark.flux
@needs_flux
def test_drains_by_reason_and_the_health_checks_last_results(flux):
    for name, ours in [("HEALTH_REASON_PREFIX", REASON_PREFIX), ("AUTOSCALE_REASON", DRAIN_REASON),
                       ("HEALTH_KVS_DIR", HEALTH_KVS_DIR)]:  # fmt: skip
        assert constant(name) == ours
    flux("resource", "drain", "0", f"{REASON_PREFIX}gpus: 3 of 4 GPUs present")
    flux("resource", "drain", "1", DRAIN_REASON)
    # as each rank's runner writes them (health.sh's publish)
    flux(
        "kvs", "put", f'{HEALTH_KVS_DIR}.0={{"gpus":[1,"3 of 4 GPUs \\"present\\""],"disk":[0,""]}}'
    )
    flux("kvs", "put", f'{HEALTH_KVS_DIR}.1={{"gpus":[0,""],"disk":[0,""]}}')
    flux("kvs", "put", f'{HEALTH_KVS_DIR}.7={{"gpus":[1,"a rank that left"]}}')
    numbers = flux.metrics()
    assert numbers == from_commands(flux, 0)
    assert numbers["nodes_drain_by_reason"]["drained"] == {"health": 1, "autoscale": 1, "other": 0}
    assert numbers["health_checks"] == {"gpus": {"pass": 1, "fail": 1},
                                        "disk": {"pass": 2, "fail": 0}}  # fmt: skip
    assert numbers["health"] == {"gpus": {"failing": "0", "line": '3 of 4 GPUs "present"'}}


@pytest.mark.flux
@needs_flux
def test_rank_0s_restarts_from_its_kept_state(flux):
    assert constant("LEAD_KVS_DIR") == LEAD_KVS_DIR
    assert flux.metrics()["lead"] == {"restarts": 0, "last": ""}  # never restarted
    # as the entrypoint's resume_lead counts them
    flux("kvs", "put", f"{LEAD_KVS_DIR}.restarts=2", f"{LEAD_KVS_DIR}.last=2026-12-05T06:40:00Z")
    numbers = flux.metrics()
    assert numbers == from_commands(flux, 0)
    assert numbers["lead_restarts"] == 2
    assert numbers["lead"] == {"restarts": 2, "last": "2026-12-05T06:40:00Z"}


@pytest.fixture
def url(flux) -> Iterator[str]:
    """The exporter serving ``flux``'s instance over HTTP: its address."""
    server = subprocess.Popen(
        [flux_binary(), "python", str(EXPORTER), "--port", "0", "--address", "127.0.0.1"],
        env=flux.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    try:
        yield f"http://127.0.0.1:{int(server.stderr.readline().split()[-1])}"
    finally:
        server.terminate()
        server.wait(timeout=60)
        server.stderr.close()


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


@pytest.mark.flux
@needs_flux
def test_the_server_answers_metrics_and_survives_a_failed_read(flux, url):
    code, kind, body = get(f"{url}/metrics")
    assert code == 200 and kind.startswith("text/plain; version=0.0.4"), (code, kind)
    assert parse(body) == flatten(json.loads(flux.exporter("--once", "--json").stdout))
    assert get(f"{url}/")[0] == 404 and get(f"{url}/metrics/x")[0] == 404
    code, kind, body = get(f"{url}/metrics.json")  # what fluxhop's operator reads
    assert (code, kind) == (200, "application/json")
    served = json.loads(body)
    assert served.pop("version")  # the queue's version (below), beside the numbers
    assert served == json.loads(flux.exporter("--once", "--json").stdout)

    flux("module", "remove", "job-list")
    code, _, body = get(f"{url}/metrics")
    assert code == 500 and body.count("\n") == 1 and "Traceback" not in body, body
    assert "reading flux failed" in body
    assert get(f"{url}/metrics.json")[0] == 500
    flux("module", "load", "job-list")
    code, _, body = get(f"{url}/metrics")
    assert code == 200 and parse(body)[("flux_brokers", (("state", "online"),))] == 2


@pytest.mark.flux
@needs_flux
def test_a_reader_waiting_for_a_change_hears_of_a_new_pending_job(flux, url):
    """GET /metrics.json?after=VERSION&wait=S answers when the job journal
    moves the version - and its numbers already include the job - while a
    scrape is answered meanwhile (the server is threaded)."""
    busy = flux.submit("-N", "2", "sleep", "300")  # both nodes
    flux.wait_state(busy, "RUN")
    first = json.loads(get(f"{url}/metrics.json")[2])
    assert first["version"] and first["pending_nodes"] == 0
    for _ in range(20):  # until a wait runs out with the version where it was
        same = json.loads(get(f"{url}/metrics.json?after={first['version']}&wait=0.5")[2])
        if same["version"] == first["version"]:
            break
        first = same
    assert same["version"] == first["version"]
    answered: list[dict] = []
    waiting = threading.Thread(target=lambda: answered.append(json.loads(
        get(f"{url}/metrics.json?after={first['version']}&wait=120")[2])))  # fmt: skip
    waiting.start()
    assert get(f"{url}/metrics")[0] == 200  # not held up by the waiting reader
    flux.submit("-N", "1", "hostname")  # it waits for the busy nodes
    waiting.join(timeout=150)
    (moved,) = answered
    assert moved["version"] != first["version"]
    assert (moved["pending_nodes"], moved["pending_max_nodes"]) == (1, 1)
    again = json.loads(get(f"{url}/metrics.json?after=stale&wait=120")[2])
    assert again["version"] == moved["version"]  # a version it does not have: at once


@pytest.fixture
def exporter(flux) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """The exporter on every address (the default), on a free port: (its process, the port)."""
    server = subprocess.Popen([flux_binary(), "python", str(EXPORTER), "--port", "0"],
                              env=flux.env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stderr is not None
    try:
        yield server, int(server.stderr.readline().split()[-1])
    finally:
        server.terminate()
        server.wait(timeout=60)
        server.stderr.close()


def _long_poll(port: int, version: str) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=60)
    client.sendall(f"GET /metrics.json?after={version}&wait=300 HTTP/1.0\r\n\r\n".encode())
    return client


@pytest.mark.flux
@needs_flux
def test_long_polls_are_bounded_and_end_with_their_clients(flux, exporter):
    """At most MAX_WAITERS long polls hold a thread; the next are answered at
    once; a waiter whose client goes ends (its thread with it)."""
    process, port = exporter
    url = f"http://127.0.0.1:{port}"
    version = json.loads(get(f"{url}/metrics.json")[2])["version"]
    assert version  # the journal is followed: waits hold
    before = threads(process.pid)  # a thread that served the request above may be ending
    waiting = [_long_poll(port, version) for _ in range(MAX_WAITERS)]
    try:
        wait_until(lambda: len(threads(process.pid) - before) == MAX_WAITERS, "every waiter held")
        extra = [_long_poll(port, version) for _ in range(5)]
        for client in extra:  # answered at once: with no cap each would hold for 300 s (timeout 60)
            with client, client.makefile("rb") as answer:
                assert answer.readline().startswith(b"HTTP/1.0 200"), "not answered"
        assert get(f"{url}/metrics")[0] == 200  # scrapes go on meanwhile
    finally:  # closed even on a failure: else the next test is blamed for the open sockets
        for client in waiting:
            client.close()
    wait_until(lambda: not threads(process.pid) - before, "the waiters' threads gone")


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.flux
@needs_flux
@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]"])
def test_it_listens_on_ipv4_and_ipv6(flux, exporter, host):
    if host == "[::1]" and not _ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback")
    code, _, body = get(f"http://{host}:{exporter[1]}/metrics")
    assert code == 200 and "flux_brokers" in body


@needs_flux
def test_once_without_an_instance_is_one_line_and_a_failure(tmp_path):
    result = subprocess.run(
        [flux_binary(), "python", str(EXPORTER), "--once", "--json"],
        env={"FLUX_URI": f"local://{tmp_path}/none", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "reading flux failed" in result.stderr


@needs_flux
def test_label_values_are_escaped():
    """A queue name with a quote, a backslash or a newline still parses."""
    numbers = json.loads(
        subprocess.run(
            [flux_binary(), "python", "-c", PRINT_EMPTY],
            cwd=EXPORTER.parent,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    )
    assert parse(numbers["text"]) == flatten(numbers["metrics"])


PRINT_EMPTY = """
import json, metrics_flux, metrics_text as metrics
states = dict.fromkeys(metrics_flux.JOB_STATES, 1)
numbers = {metrics.SOURCES.get(key, key): ({} if labels else 0) for key, _, labels in metrics.FAMILIES}
numbers["queue_jobs"] = {'odd "q"\\\\ \\n': states, "batch": states}
numbers["jobs"] = states
print(json.dumps({"metrics": numbers, "text": metrics.to_prometheus(numbers)}))
"""
