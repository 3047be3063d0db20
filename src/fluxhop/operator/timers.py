"""The operator's timers: MiniCluster resources that autoscale, and those
with health checks, are looked at every few seconds (kopf timers,
registered by ``fluxhop operator``): their queue and their drains are
inside Flux, where no Kubernetes event tells of them (operator/
autoscale_timer.py, operator/health_watch.py). Plain functions, as the
event handlers are (operator/handlers.py)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import kopf

from fluxhop.cluster.api import Kube
from fluxhop.errors import FluxhopError
from fluxhop.operator import handlers, memory
from fluxhop.operator.autoscale_timer import autoscale, waited
from fluxhop.operator.cache import GROUP, PLURAL, VERSION
from fluxhop.operator.health_watch import look
from fluxhop.workload.marks import JOB_NAME, OPERATED
from fluxhop.workload.status import running_lead

__all__ = ["on_autoscale", "on_health", "register_autoscaling", "register_health"]

LOG = handlers.LOG


def _asks_for(body: Any, field: str) -> bool:
    """A resource this operator keeps whose spec has ``field``."""
    meta = body.get("metadata") or {}
    return (
        OPERATED in (meta.get("annotations") or {})
        and (body.get("spec") or {}).get(field) is not None
        and handlers._selected(meta.get("labels") or {}, body)
    )


def _autoscaled(body: Any, **_: Any) -> bool:
    return _asks_for(body, "autoscale")


def _too_soon(key: tuple[str, str]) -> bool:
    """For looks that do not wait at rank 0: whether the last was less than
    a long poll ago (if not, this one counts as the last)."""
    if time.monotonic() - memory.unwaited.get(key, float("-inf")) < memory.wait_for_change:
        return True
    memory.unwaited[key] = time.monotonic()
    return False


def on_autoscale(body: Any, namespace: str, **_: Any) -> None:
    """One autoscaling look at a MiniCluster resource that asks for it."""
    cr = dict(body)
    name = cr["metadata"]["name"]
    kube = handlers.connect(namespace)

    key = (namespace, name)
    try:
        pod = _lead(kube, namespace, name)
        found = None
        if pod is not None:  # a long poll: the look goes on once the queue changed
            found = waited(cr, namespace, pod, memory.versions.get(key), now=time.time(),
                           most=memory.wait_for_change)  # fmt: skip
        if found is not None and found[1] is None and _too_soon(key):
            return  # rank 0 cannot wait for a change (no job journal): not every tick
        if found is not None:
            scrape, memory.versions[key] = found
            fresh = dict(body)  # kopf's live view: the resource as the watch has it now
            mine = memory.remembered.get(key)
            if mine is not None and not mine.ahead_of(fresh):
                mine = None  # the watch has brought it (or it is another resource now)
            if mine is not None and mine.outran(fresh):
                return  # the watch has not brought this operator's own resize yet
            tick = autoscale(kube, fresh, now=time.time(), lead=lambda: pod, scrape=scrape,
                             previous=mine.status if mine else None)  # fmt: skip
            memory.remembered[key] = memory.Remembered.after(fresh, tick, mine)
        elif not _too_soon(key):  # metrics by exec (not served), or rank 0 not running
            memory.remembered.pop(key, None)
            tick = autoscale(kube, cr, now=time.time(), lead=lambda: pod)
        else:
            return
    except FluxhopError as err:  # the API refused a write: the next look tries again
        LOG.warning("MiniCluster %s/%s: autoscaling: %s", namespace, name, err)
        return
    if tick.writes:
        why = (tick.status or {}).get("reason", "")
        LOG.info("MiniCluster %s/%s: %s (%s)", namespace, name, ", ".join(tick.writes), why)


def _lead(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """MiniCluster ``name``'s rank 0 pod, running: the one the pods' events
    brought, or one asked for (not seen running yet)."""
    known = memory.leads.get((namespace, name))
    if known is not None and running_lead([known]) is not None:
        return known
    return running_lead(kube.list("Pod", labels={JOB_NAME: name}))


def _health_watched(body: Any, **_: Any) -> bool:
    return _asks_for(body, "health")


def on_health(body: Any, namespace: str, **_: Any) -> None:
    """One look at the health of a MiniCluster resource with spec.health."""
    cr = dict(body)
    name, uid = cr["metadata"]["name"], cr["metadata"].get("uid")
    kube = handlers.connect(namespace)
    key = (namespace, name)
    mine = memory.health_written.get(key)
    try:
        status = look(kube, cr, _lead(kube, namespace, name),
                      mine[1] if mine is not None and mine[0] == uid else None)  # fmt: skip
    except FluxhopError as err:  # the pods could not be listed: the next look
        LOG.warning("MiniCluster %s/%s: health: %s", namespace, name, err)
        return
    if status is not None:
        memory.health_written[key] = (uid, status)


def _timer(fn: Callable[..., None], id: str, interval: float, when: Callable[..., bool],
           registry: kopf.OperatorRegistry | None) -> None:  # fmt: skip
    """``kopf.timer``, without the finalizer kopf puts on every resource a
    timer looks at (requires_finalizer=True, which kopf offers no option
    for): a stopped or removed operator would leave each MiniCluster it had
    looked at undeletable. A look needs none: one at a deleted resource finds
    nothing, and kopf stops the timer once the resource is gone. A resource
    that has the finalizer from before loses it at its next event."""
    real = registry if registry is not None else kopf.get_default_registry()
    kopf.timer(GROUP, VERSION, PLURAL, id=id, interval=interval, when=when, registry=real)(fn)
    spawning = real._spawning
    spawning._handlers = [
        dataclasses.replace(h, requires_finalizer=False) if h.fn is fn else h
        for h in spawning._handlers
    ]


def register_health(interval: float, *, registry: kopf.OperatorRegistry | None = None) -> None:
    """Look at the health of MiniClusters with spec.health every ``interval``
    seconds (fluxhop operator --health-interval); call before kopf runs."""
    _timer(on_health, "health", interval, _health_watched, registry)


def register_autoscaling(interval: float, *, registry: kopf.OperatorRegistry | None = None) -> None:
    """Look at MiniClusters that autoscale every ``interval`` seconds
    (fluxhop operator --autoscale-interval); call before kopf runs."""
    _timer(on_autoscale, "autoscale", interval, _autoscaled, registry)
