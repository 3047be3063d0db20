"""Ending a watch that another thread is reading.

A wait reads its watch on a thread of its own (so that it can time out).
lightkube's synchronous watch reads the HTTP stream until the next event,
and opens a new request when the server ends one; so a wait that is over (a
MiniCluster up, its pods steady from then on) left that thread, a watch on
the API server and a connection of the client's pool (httpx holds 100)
until those pods next changed. A long-lived client that waits for many
MiniClusters - a workload manager's, creating one per rabbit job - ran out
of connections: every request then waited for one, and failed after the
request timeout (bench/bench_rabbit_workflows.py at 100 Workflows).

No library ends it: httpx cannot interrupt a read another thread is blocked
in, and lightkube's sync watch does not close its response. So a stoppable
watch asks for a connection of its own (``Connection: close``: it never
goes back to the pool, so no other request ever shares its socket), and
stopping shuts that socket down: the blocked read fails at once, and the
watch's error handler, seeing the stop, ends the watch.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx2

__all__ = ["WatchStop", "install", "reading"]

_thread = threading.local()  # .stop: the WatchStop of the watch this thread reads


class WatchStop(threading.Event):
    """An Event that, once set, also ends the watches read for it."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()
        self._responses: list[httpx2.Response] = []

    def attach(self, response: httpx2.Response) -> None:
        with self._guard:
            if not self.is_set():
                self._responses = [r for r in self._responses if not r.is_closed]
                self._responses.append(response)
                return
        _shut(response)  # a new request after the stop (a reconnect): ended at once

    def set(self) -> None:
        super().set()
        with self._guard:
            responses, self._responses = self._responses, []
        for response in responses:
            _shut(response)


def _shut(response: httpx2.Response) -> None:
    if response.is_closed:
        return
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        # the plain socket's shutdown, also for TLS: SSLSocket.shutdown would
        # unwrap the TLS object under the reading thread's feet
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
    else:  # an in-memory transport (tests): closing it is enough
        with contextlib.suppress(Exception):
            response.close()


@contextlib.contextmanager
def reading(stop: WatchStop | None) -> Iterator[None]:
    """The current thread reads a watch that ``stop`` ends."""
    before = getattr(_thread, "stop", None)
    _thread.stop = stop
    try:
        yield
    finally:
        _thread.stop = before


def _is_watch(request: httpx2.Request) -> bool:
    return request.url.params.get("watch") in ("true", "1", "True")


def _on_request(request: httpx2.Request) -> None:
    if getattr(_thread, "stop", None) is not None and _is_watch(request):
        request.headers["Connection"] = "close"  # its own connection, never reused


def _on_response(response: httpx2.Response) -> None:
    stop = getattr(_thread, "stop", None)
    if stop is not None and _is_watch(response.request):
        stop.attach(response)


def install(client: Any) -> None:
    """Hook stoppable watches into a lightkube client's httpx client (which
    lightkube keeps private: ``Client._client._client``). Where that is not
    found, a stopped watch ends at its next event, as before."""
    http = getattr(getattr(client, "_client", None), "_client", None)
    hooks = getattr(http, "event_hooks", None)
    if not isinstance(hooks, dict) or _on_response in hooks.get("response", []):
        return
    http.event_hooks = {  # type: ignore[union-attr]
        **hooks,
        "request": [*hooks.get("request", []), _on_request],
        "response": [*hooks.get("response", []), _on_response],
    }
