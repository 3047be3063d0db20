"""Requests as the API server saw them: its audit log, read back.

A ``LocalCluster(audited=groups)`` logs every request of a user in those
groups (tests/realk8s/components.py, ``audit_flags``); this counts them, by
user, verb and resource, in a window of time. The count is the API server's,
not the client's own: what a benchmark compares (bench/bench_operator_scale.py).

One request is one line: a request that streams (a watch, a log follow, an
exec) at its ResponseStarted stage, any other at ResponseComplete; its time
is when the API server received it.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Request", "count", "requests"]


@dataclass(frozen=True)
class Request:
    user: str
    verb: str
    resource: str  # e.g. "pods", "pods/status", "miniclusters"
    namespace: str
    name: str
    code: int
    received: float  # seconds since the epoch

    @classmethod
    def of(cls, event: dict[str, Any]) -> Request:
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        received = event["requestReceivedTimestamp"].replace("Z", "+00:00")
        return cls(
            user=event.get("user", {}).get("username", ""),
            verb=event.get("verb", ""),
            resource=resource,
            namespace=ref.get("namespace", ""),
            name=ref.get("name", ""),
            code=int((event.get("responseStatus") or {}).get("code", 0)),
            received=datetime.datetime.fromisoformat(received).timestamp(),
        )


def requests(log: Path, user: str | None = None) -> list[Request]:
    """Every request in the audit log (of ``user``, when named), in order."""
    found: list[Request] = []
    if not log.exists():
        return found
    started: set[str] = set()  # the streams: counted at their start, not again at their end
    with open(log) as lines:
        for line in lines:
            event = json.loads(line)
            stage = event.get("stage")
            if stage == "ResponseStarted":
                started.add(event["auditID"])
            elif stage not in ("ResponseComplete", "Panic") or event["auditID"] in started:
                continue
            request = Request.of(event)
            if user is None or request.user == user:
                found.append(request)
    return found


def count(found: list[Request], since: float, until: float) -> Counter[str]:
    """Requests received in [since, until), by verb and resource ("get jobs")."""
    return Counter(f"{r.verb} {r.resource}" for r in found if since <= r.received < until)
