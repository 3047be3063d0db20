"""Reading a MiniCluster's metrics over the pod network: rank 0's exporter
(render/templates/metrics.py) answers ``GET /metrics.json`` on its metrics
port. fluxhop's operator reads it this way - no API request and no exec per
look, so it can look often - and the NetworkPolicy lets the operator's
namespace in for MiniClusters that autoscale. It can also wait there for
the queue to change (a long poll), so it hears of a new pending job at once."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlencode

import httpx2

from fluxhop.errors import InstanceError
from fluxhop.workload.inside import parse_metrics

__all__ = ["metrics_url", "scrape_json"]


def metrics_url(pod: dict[str, Any], port: int, *, after: str | None = None,
                wait: float = 0) -> str:  # fmt: skip
    """Where rank 0's pod serves its metrics as JSON (raises: no IP yet)."""
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        name = pod.get("metadata", {}).get("name", "?")
        raise InstanceError(f"rank 0's pod {name} has no IP yet")
    host = f"[{ip}]" if ipaddress.ip_address(ip).version == 6 else ip
    query = f"?{urlencode({'after': after, 'wait': f'{wait:g}'})}" if after and wait > 0 else ""
    return f"http://{host}:{port}/metrics.json{query}"


def scrape_json(
    pod: dict[str, Any],
    port: int,
    *,
    after: str | None = None,
    wait: float = 0,
    timeout: float = 30,
) -> dict[str, Any]:
    """metrics.py's JSON from rank 0's pod; one line when it cannot be had.
    With ``after`` (the ``version`` an earlier answer had) and ``wait``, the
    exporter answers once its queue has changed, or ``wait`` seconds later."""
    url = metrics_url(pod, port, after=after, wait=wait)
    where = url.partition("?")[0]  # what a failure names: the same line at every wait
    try:
        response = httpx2.get(url, timeout=timeout + (wait if after else 0))
    except httpx2.HTTPError as err:
        raise InstanceError(
            f"cannot read the metrics at {where} ({type(err).__name__}); is the metrics "
            "port open to this namespace in the MiniCluster's NetworkPolicy?"
        ) from None
    if response.status_code != 200:
        line = response.text.strip().splitlines()[:1] or [""]
        raise InstanceError(f"the metrics at {where} answered {response.status_code}: {line[0]}")
    found, problem = parse_metrics(response.text)  # checked as fluxhop status checks it
    if found is None:
        raise InstanceError(f"the metrics at {where}: {problem or 'an empty answer'}")
    return found
