"""A container's log, followed to its end across broken streams.

A followed log goes through the API server, which proxies the kubelet: when
the API server restarts, the stream breaks although the container runs on.
Following again from the start would print everything twice, and from
"now" would lose what came in between. So the lines are asked for with the
kubelet's timestamps (stripped before they are passed on); after a break
the log is asked for again from a little before the last line passed on
(``sinceSeconds``, the only form lightkube sends), and the lines up to that
one are skipped. A stream that ends while the container still runs is
followed again too; one whose kubelet cannot be reached any more ends here
(the caller then watches the pod for how it ended). A line without a
timestamp is the kubelet's, not the container's, and is not passed on.

A stream also ends when the container's process does, and a real kubelet
says so in the pod's status a moment later (its pod lifecycle relist runs
each second, later on a loaded node): so after a stream ends, the pod's
status is given ``STATUS_LAG`` seconds to say the container ended before
the log is followed again. Once it has ended, the log is read once more
without following, for what a broken stream may have missed before the end.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopError, Unreachable

__all__ = ["follow_log", "stamp_key"]

# Seconds of log asked for again before the last line passed on: the
# kubelet's clock and this machine's may differ a little.
SLACK = 5
# How many broken streams in a row are followed again; each retry first waits
# (within the request timeout) for the API server to answer again.
MAX_BREAKS = 10
# How long a container's status may still say running after its log ended,
# and how often it is read meanwhile
STATUS_LAG = 10.0
STATUS_EVERY = 0.25
# What every line of a log asked for with timestamps starts with. A line
# without one is not the container's: the kubelet's own words, written into
# the stream when it cannot read the log (a container removed under an
# eviction: "unable to retrieve container logs for containerd://...")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
log = logging.getLogger("fluxhop.logs")


def stamp_key(stamp: str) -> tuple[str, str]:
    """An RFC 3339 timestamp as a sortable key: Go drops trailing zeros of the
    fraction (RFC3339Nano), so the text alone does not sort."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return whole, fraction.ljust(9, "0")


def _running(pod: dict[str, Any] | None, container: str) -> bool:
    for status in (pod or {}).get("status", {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return "running" in (status.get("state") or {})
    return False


def _ended(
    kube: Kube, pod: str, container: str, clock: Callable[[], float], sleep: Callable[[float], None]
) -> bool:
    """Whether the container's status says it no longer runs, within STATUS_LAG."""
    deadline = clock() + STATUS_LAG
    while _running(kube.get("Pod", pod), container):
        if clock() >= deadline:
            return False
        sleep(STATUS_EVERY)
    return True


def follow_log(
    kube: Kube,
    pod: str,
    container: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """The lines of ``container``'s log as they come, until it ends."""
    last: tuple[str, str] | None = None
    at_last = 0  # lines passed on that carry the stamp ``last`` (a stamp is not unique)
    last_at = 0.0
    breaks = 0
    final = False  # the container has ended: one more read, not followed
    while True:
        since = None if last is None else int(clock() - last_at) + SLACK
        seen_at_last = 0
        try:
            lines = kube.log(pod, container, follow=not final, timestamps=True, since_seconds=since)
            for line in lines:
                stamp, _, text = line.partition(" ")
                if not STAMP.fullmatch(stamp):
                    log.debug("pod %s: not a line of its log: %s", pod, line.rstrip())
                    continue
                key = stamp_key(stamp)
                if last is not None and key < last:
                    continue  # passed on before the stream broke
                if last is not None and key == last:
                    seen_at_last += 1
                    if seen_at_last <= at_last:
                        continue  # the same: passed on before
                    at_last += 1
                else:
                    last, at_last = key, 1
                    seen_at_last = 1
                last_at, breaks = clock(), 0
                yield text
        except Unreachable:
            breaks += 1
            if breaks > MAX_BREAKS:
                raise
            continue
        except FluxhopError:
            if breaks == 0 and not final:
                raise
            return  # the API server is back but not the kubelet (its node is gone)
        if final:
            return
        if _ended(kube, pod, container, clock, sleep):
            final = True
            continue
        breaks += 1  # ended early (an API server that shut down): follow again
        if breaks > MAX_BREAKS:
            raise Unreachable(
                f"the log of pod {pod} ended {MAX_BREAKS} times while its container ran; "
                "gave up following it"
            )
