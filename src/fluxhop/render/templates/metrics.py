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

The program is four files, shipped side by side (Python finds the others
beside this one): this one, the command line and the HTTP server;
metrics_flux.py, the numbers read from Flux; metrics_text.py, Prometheus's
text format; metrics_changes.py, the queue's version and the long poll.
"""

# ruff: noqa: UP006, UP035, UP045 - Python 3.6 has no dict[...] or X | None in hints

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any, List, Optional
from urllib.parse import parse_qs

from metrics_changes import GONE, Changes, client_gone  # type: ignore[import-not-found,unused-ignore]  # a sibling where it runs
from metrics_flux import Collector  # type: ignore[import-not-found,unused-ignore]  # a sibling where it runs
from metrics_text import CONTENT_TYPE, Metrics, to_prometheus  # type: ignore[import-not-found,unused-ignore]  # a sibling where it runs


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
                asked.get("after", [None])[-1], seconds, lambda: client_gone(self.connection)
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
