"""The fake API server over real HTTP on 127.0.0.1, for clients that open
their own sockets (kopf's aiohttp client in the operator's end-to-end test):
each request goes to the same FakeAPIServer.handle the in-process transport
uses, so both see one state; watches stream with chunked encoding. Discovery
(/api, /apis, /apis/GROUP/VERSION) is answered from the fake's resources."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2

from tests.cluster.fakeapi import CLUSTER_SCOPED, CRD_KINDS, RESOURCES, FakeAPIServer

__all__ = ["HTTPFake"]

VERBS = ["get", "list", "watch", "create", "patch", "delete"]


# What kopf's "backbone" needs to exist before it starts (it waits for them):
# namespaces and CRDs, served here as fixed lists and idle watches.
_CLUSTER_SCOPED = {
    "api/v1": [("namespaces", "Namespace")],
    "apis/apiextensions.k8s.io/v1": [("customresourcedefinitions", "CustomResourceDefinition")],
}


def _static_list(path: str) -> dict[str, Any] | None:
    if path == "/api/v1/namespaces":
        items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}]
        return {
            "kind": "NamespaceList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "1"},
            "items": items,
        }
    if path == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions":
        return {
            "kind": "CustomResourceDefinitionList",
            "apiVersion": "apiextensions.k8s.io/v1",
            "metadata": {"resourceVersion": "1"},
            "items": [],
        }
    return None


def _discovery(fake: FakeAPIServer, path: str) -> dict[str, Any] | None:
    served = {
        (prefix, plural): value
        for (prefix, plural), value in RESOURCES.items()
        if value[1] not in CRD_KINDS or value[1] in fake.crds
    }
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups: dict[str, list[str]] = {"apiextensions.k8s.io": ["v1"]}
        for prefix, _ in served:
            if prefix.startswith("apis/"):
                _, group, version = prefix.split("/")
                groups.setdefault(group, []).append(version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": group,
                    "versions": [
                        {"groupVersion": f"{group}/{v}", "version": v} for v in sorted(set(vs))
                    ],
                    "preferredVersion": {"groupVersion": f"{group}/{vs[0]}", "version": vs[0]},
                }
                for group, vs in sorted(groups.items())
            ],
        }
    prefix = path.strip("/")
    found = [(plural, kind) for (p, plural), (_, kind) in served.items() if p == prefix]
    if not found and prefix not in _CLUSTER_SCOPED:
        return None
    resources = [
        {
            "name": plural,
            "singularName": kind.lower(),
            "namespaced": False,
            "kind": kind,
            "verbs": VERBS,
        }
        for plural, kind in _CLUSTER_SCOPED.get(prefix, [])
    ]
    for plural, kind in found:
        resources.append(
            {
                "name": plural,
                "singularName": kind.lower(),
                "namespaced": kind not in CLUSTER_SCOPED,
                "kind": kind,
                "verbs": VERBS,
            }
        )
        for sub in ("status", "scale") if kind == "MiniCluster" else ():
            resources.append(
                {
                    "name": f"{plural}/{sub}",
                    "singularName": "",
                    "namespaced": True,
                    "kind": kind,
                    "verbs": ["get", "patch"],
                }
            )
    group_version = prefix.removeprefix("api/").removeprefix("apis/")
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


class HTTPFake:
    """``with HTTPFake(fake) as url:`` serves ``fake`` at ``url`` until the block ends."""

    def __init__(self, fake: FakeAPIServer) -> None:
        self.fake = fake
        self.paths: list[str] = []  # every request, as "VERB path?query"
        self.stopped = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                outer.paths.append(f"{self.command} {self.path}")
                found = None
                if self.command == "GET":
                    found = _discovery(outer.fake, path) or _static_list(path)
                if found is not None and "watch=true" in self.path:
                    self._idle()  # a watch on a fixed list: no events, ever
                    return
                if found is not None:
                    self._send(
                        200, {"content-type": "application/json"}, json.dumps(found).encode()
                    )
                    return
                request = httpx2.Request(
                    self.command,
                    f"https://fake.invalid:6443{self.path}",
                    headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
                    content=body,
                )
                response = outer.fake.handle(request)
                stream = "watch=true" in self.path
                if not stream:
                    self._send(response.status_code, dict(response.headers), response.read())
                    return
                self.send_response(response.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for chunk in response.iter_raw():
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _idle(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                outer.stopped.wait()

            def _send(self, code: int, headers: dict[str, str], content: bytes) -> None:
                self.send_response(code)
                self.send_header("content-type", headers.get("content-type", "application/json"))
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> str:
        self.thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()
