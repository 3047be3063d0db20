"""The operator's informer cache (operator/cache.py): handlers given kopf's
indexes read from them, not from the API server. The indexes here are built
from the fake API server's store, as kopf builds them from its watches."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, tzinfo
from typing import Any

import pytest

from fluxhop.operator import cache, handlers, reconcile
from fluxhop.operator.cache import Seen
from fluxhop.workload.marks import OPERATED
from tests.operator.test_reconcile import conditions, resource


def indexes(fake) -> dict[str, dict[tuple[str, str], list[dict[str, Any]]]]:
    """kopf's three indexes, as kopf's indexers would fill them now."""
    found: dict[str, dict[tuple[str, str], list[dict[str, Any]]]] = {
        "miniclusters": {},
        "fluxhop_jobs": {},
        "fluxhop_pods": {},
    }
    indexers = {
        "MiniCluster": ("miniclusters", cache.miniclusters),
        "Job": ("fluxhop_jobs", cache.fluxhop_jobs),
        "Pod": ("fluxhop_pods", cache.fluxhop_pods),
    }
    for obj in fake.objects(kinds=tuple(indexers)):
        index, indexer = indexers[obj["kind"]]
        meta = obj["metadata"]
        if obj["kind"] != "MiniCluster" and "fluxhop.io/minicluster" not in meta.get("labels", {}):
            continue  # outside the indexer's label filter
        made = indexer(namespace=meta["namespace"], name=meta["name"],
                       labels=meta.get("labels") or {}, body=copy.deepcopy(obj))  # fmt: skip
        for key, value in made.items():
            found[index].setdefault(key, []).append(value)
    return found


@pytest.fixture
def settled(fake, connected, kube):
    """MiniCluster demo created, its 2 pods Running and its status Ready."""
    kube.apply(resource())
    handlers.on_minicluster(body=fake.get("MiniCluster", "demo"), namespace="default")
    for _ in range(50):  # until the pods run and a look at them writes nothing more
        fake.reconcile()
        pods = fake.objects(kinds=("Pod",))
        before = len(fake.requests)
        handlers.on_pod(body=pods[0], namespace="default", type="MODIFIED", **indexes(fake))
        running = len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
        if running and not [r for r in fake.requests[before:] if r.method != "GET"]:
            break
    assert conditions(fake.get("MiniCluster", "demo"))["Ready"] == "True"
    return fake


def test_a_settled_resource_is_reconciled_without_a_request(settled):
    before = len(settled.requests)
    found = indexes(settled)
    body = settled.get("MiniCluster", "demo")
    handlers.on_minicluster(body=body, namespace="default", type="MODIFIED", **found)
    for pod in settled.objects(kinds=("Pod",)):
        handlers.on_pod(body=pod, namespace="default", type="MODIFIED", **found)
    handlers.on_job(body=settled.get("Job", "demo"), namespace="default", type="MODIFIED", **found)
    assert settled.requests[before:] == []


def test_a_deleted_job_is_made_again_from_its_event(settled, kube):
    job = settled.get("Job", "demo")
    kube.delete("Job", "demo")
    settled.reconcile()
    handlers.on_job(body=job, namespace="default", type="DELETED", **indexes(settled))
    assert settled.get("Job", "demo")["metadata"]["uid"] != job["metadata"]["uid"]


def test_a_pod_whose_job_the_watch_has_not_shown_waits_for_the_job_event(settled):
    found = indexes(settled)
    found["fluxhop_jobs"] = {}
    before = len(settled.requests)
    handlers.on_pod(
        body=settled.objects(kinds=("Pod",))[0], namespace="default", type="MODIFIED", **found
    )
    assert settled.requests[before:] == []


def test_a_resource_being_deleted_is_not_made_again(settled, kube):
    found = indexes(settled)
    (cr,) = found["miniclusters"][("default", "demo")]
    cr["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    job = settled.get("Job", "demo")
    kube.delete("Job", "demo")
    found["fluxhop_jobs"] = {}
    handlers.on_job(body=job, namespace="default", type="DELETED", **found)
    assert settled.get("Job", "demo") is None


def test_the_first_reconcile_behind_the_watch_still_counts_the_resource_as_ours(settled):
    """The resource's index lags while its first reconcile runs (kopf updates
    it between that resource's handlers): a pod event then sees the resource
    without fluxhop's mark, but its Job owned by the resource says it is ours."""
    found = indexes(settled)
    (cr,) = found["miniclusters"][("default", "demo")]
    del cr["metadata"]["annotations"][OPERATED]
    cr["status"] = {}  # as before the first status
    handlers.on_pod(
        body=settled.objects(kinds=("Pod",))[0], namespace="default", type="MODIFIED", **found
    )
    assert conditions(settled.get("MiniCluster", "demo"))["Ready"] == "True"
    writes = [r.verb for r in settled.requests if r.verb != "GET"]
    assert "PATCH" in writes  # the status written again, from the pods it saw

    (job,) = found["fluxhop_jobs"][("default", "demo")]
    job["metadata"]["ownerReferences"] = []  # a Job the operator did not make
    before = len(settled.requests)
    handlers.on_pod(
        body=settled.objects(kinds=("Pod",))[0], namespace="default", type="MODIFIED", **found
    )
    assert settled.requests[before:] == []


def test_seen_keeps_the_pods_of_this_job_only():
    job = {"metadata": {"name": "demo", "uid": "new"}}
    pods = [
        {"metadata": {"name": "demo-0-a", "ownerReferences": [{"uid": "old"}]}},
        {"metadata": {"name": "demo-0-b", "ownerReferences": [{"uid": "new"}]}},
    ]
    assert [p["metadata"]["name"] for p in Seen(job, pods).pods_of(job)] == ["demo-0-b"]


def test_no_indexes_passed_is_no_cache():
    assert cache.seen("default", "demo", None, {}) is None
    assert cache.seen("default", "demo", {}, {}) == Seen(None, [])


class _Later(datetime):
    """The clock an hour on: a condition made anew would get another time."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        return datetime.now(tz) + timedelta(hours=1)


def test_a_lagging_copy_of_the_resource_does_not_write_again(settled, monkeypatch):
    """What the operator wrote is newer than a watch that lags behind it: the
    resource's copy without the marks and the status makes no write, even
    in a later second (its conditions keep the times written)."""
    monkeypatch.setattr(reconcile, "datetime", _Later)
    found = indexes(settled)
    (cr,) = found["miniclusters"][("default", "demo")]
    for key in [k for k in cr["metadata"]["annotations"] if k.startswith("fluxhop.io/")]:
        del cr["metadata"]["annotations"][key]
    cr["status"] = {}
    cr["metadata"]["resourceVersion"] = "1"  # the watch's copy of long before
    before = len(settled.requests)
    pod = settled.objects(kinds=("Pod",))[0]
    handlers.on_pod(body=pod, namespace="default", type="MODIFIED", **found)
    assert settled.requests[before:] == []

    # a copy as new as the last write is the truth: here, a status someone
    # else changed since (another replica) is written again
    stored = settled.store[("MiniCluster", "default", "demo")]
    stored["status"]["brokersUp"] = 0
    stored["metadata"]["resourceVersion"] = str(10**9)
    handlers.on_pod(body=pod, namespace="default", type="MODIFIED", **indexes(settled))
    assert settled.get("MiniCluster", "demo")["status"]["brokersUp"] == 2


def test_the_listing_at_start_is_left_to_the_resources_resume_handler(settled):
    found = indexes(settled)
    kube_job = settled.get("Job", "demo")
    settled.store.pop(("Job", "default", "demo"))  # a reconcile would make it again
    found["fluxhop_jobs"] = {}
    handlers.on_job(body=kube_job, namespace="default", type=None, **found)
    handlers.on_pod(
        body=settled.objects(kinds=("Pod",))[0], namespace="default", type=None, **found
    )
    assert settled.get("Job", "demo") is None
