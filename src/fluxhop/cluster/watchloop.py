"""A watch that survives the API server: it resumes after a drop from the
last resourceVersion it saw (trying a server that cannot be reached for
the whole request timeout), retries overload, and starts over after
``410 Gone`` (or says the history is gone). ``Kube.watch`` runs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx2
from lightkube import ApiError
from lightkube.types import OnErrorAction, OnErrorResult

from fluxhop.cluster.answers import MAX_UNREACHABLE_DELAY, RETRYABLE, failure_of
from fluxhop.cluster.kinds import kind
from fluxhop.cluster.watchstop import WatchStop
from fluxhop.errors import Expired, Unreachable

if TYPE_CHECKING:
    from fluxhop.cluster.api import Kube

__all__ = ["resumable_watch"]


def resumable_watch(
    kube: Kube,
    kind_name: str,
    labels: dict[str, str] | None,
    resource_version: str | None,
    relist: bool,
    stop: WatchStop | None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    what = kind(kind_name)
    failing_since: list[float] = []  # when the current run of failures began

    def unreachable(count: int) -> float | None:
        """How long to wait before another try, or None when time is up."""
        if count == 1 or not failing_since:
            failing_since[:] = [kube.clock()]
        delay = min(kube.backoff * 2 ** min(count - 1, 16), MAX_UNREACHABLE_DELAY)
        spent = kube.clock() - failing_since[0]
        return delay if spent + delay <= kube._unreachable_budget() else None

    def on_error(err: Exception, count: int) -> OnErrorResult:
        if stop is not None and stop.is_set():
            return OnErrorResult(OnErrorAction.STOP)  # the read the stop broke
        code = failure_of(err)[0]
        if isinstance(err, httpx2.TransportError) and not isinstance(err, httpx2.TimeoutException):
            delay = unreachable(count)
            if delay is not None:
                return OnErrorResult(OnErrorAction.RETRY, delay)
        elif code != 410 and code in RETRYABLE and count <= kube.retries:
            return OnErrorResult(OnErrorAction.RETRY, kube.backoff * 2 ** min(count - 1, 16))
        return OnErrorResult(OnErrorAction.RAISE)

    version = resource_version
    attempts = 0
    while stop is None or not stop.is_set():  # stopped: no new request
        stream = kube.client.watch(
            what.resource,
            namespace=kube.namespace,
            labels=labels,
            resource_version=version,
            on_error=on_error,
        )
        try:
            for event, obj in stream:
                attempts = 0
                kube.contact.reached = True
                data = obj.to_dict()
                version = data.get("metadata", {}).get("resourceVersion") or version
                yield event, data
            return
        except (ApiError, httpx2.HTTPStatusError) as err:
            if failure_of(err)[0] == 410:
                if not relist:
                    raise Expired(f"the watch on {what.title} is too old to resume") from None
                version = None  # too old: list the current state again
                continue
            raise kube._translate(err, "watch", what, None) from None
        except httpx2.TransportError as err:
            if stop is not None and stop.is_set():
                return
            # lightkube reconnects outside its error handler: a refused
            # reconnect (a restarting API server) lands here
            attempts += 1
            delay = None if isinstance(err, httpx2.TimeoutException) else unreachable(attempts)
            if delay is None and not kube.contact.reached:
                raise kube._cannot_reach(err) from None
            if delay is None:
                raise Unreachable(
                    f"lost the watch on {what.title} at {kube.server}: {err}"
                ) from None
            kube.sleep(delay)
