"""A small Kubernetes API client over httpx, for the test cluster's own
programs (the kubelet, the fixture) and for tests that check what the API
server holds without going through fluxhop's client.

Requests are plain paths and dicts; errors are ``ApiError`` with the API
server's status code and message.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx  # the httpx that lightkube, a dependency of fluxhop, brings

__all__ = ["Api", "ApiError", "Credentials"]

PATCH_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


TOO_MANY_FOR = 60.0  # seconds a request answered 429 is tried again


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("Retry-After", "1")), 0.1), 5.0)
    except ValueError:
        return 1.0


class ApiError(Exception):
    def __init__(self, status: int, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.body = body or {}

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", ""))


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and who we are to it (a client certificate or a token)."""

    server: str
    ca: Path
    cert: Path | None = None
    key: Path | None = None
    token: str | None = None


class Api:
    def __init__(self, credentials: Credentials, timeout: float = 30) -> None:
        self.credentials = credentials
        context = ssl.create_default_context(cafile=str(credentials.ca))
        if credentials.cert:
            context.load_cert_chain(str(credentials.cert), str(credentials.key))
        headers = {"Authorization": f"Bearer {credentials.token}"} if credentials.token else {}
        self.http = httpx.Client(
            base_url=credentials.server, verify=context, headers=headers, timeout=timeout
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        content = None if body is None else json.dumps(body).encode()
        deadline = time.monotonic() + TOO_MANY_FOR
        while True:
            response = self.http.request(
                method,
                path,
                content=content,
                params=params,
                headers={"Content-Type": content_type} if content is not None else {},
            )
            # 429 (overload, or "storage is (re)initializing" while a
            # resource's watch cache starts): asked to come back, as
            # client-go does, after Retry-After
            if response.status_code != 429 or time.monotonic() >= deadline:
                return self._answer(response)
            time.sleep(_retry_after(response))

    @staticmethod
    def _answer(response: httpx.Response) -> Any:
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            body = data if isinstance(data, dict) else {}
            raise ApiError(response.status_code, body.get("message") or response.text[:500], body)
        return data if data is not None else response.text

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def find(self, path: str) -> Any:
        """GET, or None where it does not exist."""
        try:
            return self.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def create(self, path: str, body: dict[str, Any], **params: Any) -> Any:
        return self.request("POST", path, body=body, params=params or None)

    def replace(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, kind: str = "strategic", **params: Any) -> Any:
        return self.request(
            "PATCH", path, body=body, params=params or None, content_type=PATCH_TYPES[kind]
        )

    def apply(self, path: str, body: dict[str, Any], manager: str, **params: Any) -> Any:
        """Server-side apply."""
        return self.patch(path, body, "apply", fieldManager=manager, **params)

    def delete(self, path: str, body: dict[str, Any] | None = None, **params: Any) -> Any:
        return self.request("DELETE", path, body=body, params=params or None)

    def text(self, path: str, **params: Any) -> str:
        """A plain-text answer (pod logs)."""
        response = self.http.get(path, params=params or None)
        if response.status_code >= 400:
            self._answer(response)
        return response.text

    def watch(
        self, path: str, resource_version: str, timeout: int = 300, **params: Any
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) of each event from ``resource_version`` on; an ERROR
        event (410 Gone after a compaction) is yielded for the caller to re-list."""
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout),
            **params,
        }
        with self.http.stream(
            "GET", path, params=query, timeout=httpx.Timeout(timeout + 30, connect=30)
        ) as response:
            if response.status_code >= 400:
                response.read()
                self._answer(response)
            for line in response.iter_lines():
                if line:
                    event = json.loads(line)
                    yield event["type"], event["object"]
