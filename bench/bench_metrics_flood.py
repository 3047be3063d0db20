"""A flood of long polls against rank 0's metrics exporter (plain script;
prints numbers).

    python bench/bench_metrics_flood.py [--polls 1000] [--against OLD_METRICS_PY]

Needs flux-core (python -m tests.build). A real Flux instance (two brokers),
the exporter (render/templates/metrics.py, and ``--against`` another copy of
it, e.g. ``git show REV:src/fluxhop/render/templates/metrics.py``) serving
it; then POLLS clients connect at once, each asking
``/metrics.json?after=VERSION&wait=300`` (the version does not move: no job
runs). Per exporter: how many were handled (answered, or held by one of its
threads) within 60 s, and in how many seconds; how many were answered at once
(beyond the exporter's cap on waiters); the median of 5 scrapes of /metrics
during the flood; its threads during the flood and 15 s at most after the
clients have closed, against its threads before.
"""

from __future__ import annotations

import argparse
import errno
import json
import selectors
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realflux import missing_flux
from tests.render.fluxmetrics import EXPORTER, Instance, flux_binary, threads

ACCEPT_WINDOW = 60.0  # seconds the flood's connections are given
SETTLE = 15.0  # seconds the threads are given to go once the clients have closed


def scrape(url: str) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(f"{url}/metrics", timeout=60) as answer:
        answer.read()
    return time.monotonic() - started


def flood(port: int, version: str, polls: int, held: Callable[[], int]) -> tuple[list[socket.socket], int, int, float]:  # fmt: skip
    """Connect ``polls`` clients at once, each sending its long poll; until
    every one is handled - answered, or held by a thread of the exporter
    (``held``) - or the window closes. (the clients, answered, handled, seconds)."""
    request = f"GET /metrics.json?after={version}&wait=300 HTTP/1.0\r\n\r\n".encode()
    selector = selectors.DefaultSelector()
    clients = []
    for _ in range(polls):
        client = socket.socket()
        client.setblocking(False)
        if client.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS):
            raise OSError("connect failed")
        selector.register(client, selectors.EVENT_WRITE)
        clients.append(client)
    started, answered, handled = time.monotonic(), 0, 0
    while time.monotonic() < started + ACCEPT_WINDOW:
        for key, events in selector.select(timeout=0.1):
            client = key.fileobj
            assert isinstance(client, socket.socket)
            if events & selectors.EVENT_WRITE:
                if client.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    client.send(request)
                selector.modify(client, selectors.EVENT_READ)
            elif events & selectors.EVENT_READ:
                answered += 1
                selector.unregister(client)
        handled = min(polls, answered + held())  # an answered thread may not have ended yet
        if handled >= polls:
            break
    selector.close()
    return clients, answered, handled, time.monotonic() - started


def measure(exporter: Path, flux: Instance, polls: int) -> dict[str, float]:
    server = subprocess.Popen([flux_binary(), "python", str(exporter), "--port", "0",
                               "--address", "127.0.0.1"], env=flux.env,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stderr is not None
    try:
        port = int(server.stderr.readline().split()[-1])
        url = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{url}/metrics.json", timeout=60) as answer:
            version = json.loads(answer.read())["version"]
        before = threads(server.pid)
        clients, answered, handled, seconds = flood(
            port, version, polls, lambda: threads(server.pid) - before
        )
        during = threads(server.pid)
        scrapes = statistics.median(scrape(url) for _ in range(5))
        for client in clients:
            client.close()
        deadline = time.monotonic() + SETTLE
        while threads(server.pid) > before and time.monotonic() < deadline:
            time.sleep(0.1)
        return {"handled": handled, "seconds": seconds, "answered at once": answered,
                "scrape s": scrapes, "threads before": before, "threads during": during,
                "threads after": threads(server.pid)}  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=60)
        server.stderr.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=1000)
    parser.add_argument("--against", type=Path, help="another metrics.py to flood the same way")
    args = parser.parse_args()
    reason = missing_flux()
    if reason:
        raise SystemExit(f"bench_metrics_flood: {reason}")
    exporters = {"this": EXPORTER, **({"against": args.against} if args.against else {})}
    flux = Instance(size=2)
    try:
        rows = {name: measure(path, flux, args.polls) for name, path in exporters.items()}
    finally:
        flux.stop()
    print(f"{args.polls} long polls at once (handled - answered or held by a thread - within "
          f"{ACCEPT_WINDOW:g} s; threads settled "
          f"within {SETTLE:g} s of the clients closing)")  # fmt: skip
    for name, row in rows.items():
        print(f"{name:8} {row['handled']:.0f} handled in {row['seconds']:.2f} s, "
              f"{row['answered at once']:.0f} answered at once, scrape {row['scrape s']:.3f} s, "
              f"threads {row['threads before']:.0f} -> {row['threads during']:.0f} -> "
              f"{row['threads after']:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
