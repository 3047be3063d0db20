"""The fake API server's pods/exec, reached the way lightkube reaches the
real one: lightkube's exec opens a WebSocket (``connect_ws``), here one GET
the fake answers - so RBAC (create pods/exec), a missing pod or container
and the request count are the fake's - and the messages it then streams on
channels 1-3 (stdout, stderr, the Status with the exit code) as the API
server does. The command runs in the test's ``FakeAPIServer.exec_runner``."""

from __future__ import annotations

import contextlib
import json
import queue
from collections.abc import Iterator
from unittest import mock

import httpx2
from httpx2.websockets import WebSocketUpgradeError


class FakeSocket:
    subprotocol = "v5.channel.k8s.io"

    def __init__(self, messages: list[bytes]) -> None:
        self.messages = messages

    def __enter__(self) -> FakeSocket:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def receive_bytes(self, timeout: float | None = None) -> bytes:
        if not self.messages:
            raise queue.Empty
        return self.messages.pop(0)


def channels(code: int, out: str, err: str) -> list[bytes]:
    if code == 0:
        state = {"metadata": {}, "status": "Success"}
    else:
        state = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                 "message": f"command terminated with non-zero exit code: {code}",
                 "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}  # fmt: skip
    said = [b"\x01" + out.encode()] if out else []
    said += [b"\x02" + err.encode()] if err else []
    return [*said, b"\x03" + json.dumps(state).encode()]


@contextlib.contextmanager
def exec_through_fake() -> Iterator[None]:
    """Route lightkube's exec through the fake API server its client uses."""

    def connect(url: str, client: httpx2.Client, subprotocols: list[str], params: dict):
        response = client.get(url, params=params)
        if response.status_code != 200:
            raise WebSocketUpgradeError(response)
        done = response.json()
        return FakeSocket(channels(done["code"], done["stdout"], done["stderr"]))

    with mock.patch("lightkube.core.websocket.connect_ws", connect):
        yield
