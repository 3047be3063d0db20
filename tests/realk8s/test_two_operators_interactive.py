"""MiniClusters that wait for work, under both operators (issue #35 item
3): fluxhop's ``examples/operator-managed.yaml`` (which says it runs
unchanged under the Flux Operator), ``examples/interactive-ensemble.yaml``
and ``examples/fluxion-queue-policy.yaml`` (with the queue policy each
operator writes into the broker config), and upstream's ``interactive__minicluster-persistent`` and
``scaling__expand``. Each is taken through the steps a user types: every
broker up, a job on every node, ``kubectl scale minicluster`` to its
maxSize, a job on every node again, ``flux shutdown`` - first under the
Flux Operator, then, in another namespace once it has stopped, under
``fluxhop operator`` (never both at once: tests/realk8s/sides.py). Flux is
reached in rank 0 as fluxhop's own verbs reach it (tests/realk8s/inside.py).

Upstream's two run ``rockylinux:9`` with the Flux Operator's default view
(Ubuntu 24.04): on a real Rocky 9 its flux needs glibc 2.39 and Rocky 9 has
2.34. Here ``rockylinux:9`` is Debian 12 under that name (as ``ubuntu:noble``
is: tests/realk8s/images), so both start; what differs is who says so."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance import REPO
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.inside import flux, online
from tests.realk8s.outcomes import KINDS, MINICLUSTERS, events_of, job_finished, upstream_example
from tests.realk8s.sides import side_by_side
from tests.realk8s.test_operator import condition, deployed  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, kubectl

pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]

OURS = ("operator-managed.yaml", "interactive-ensemble.yaml", "fluxion-queue-policy.yaml")
UPSTREAM = ("interactive__minicluster-persistent.yaml", "scaling__expand__minicluster.yaml")
EXAMPLES = OURS + UPSTREAM
RENAMED = dict(
    zip(UPSTREAM, ("persistent", "expand"), strict=True)
)  # upstream's are all flux-sample


def example(name: str) -> dict[str, Any]:
    """The example as a user has it (upstream's renamed, to share a namespace)."""
    if name in OURS:
        document: dict[str, Any] = yaml.safe_load((REPO / "examples" / name).read_text())
    else:
        document = upstream_example(name)
        document["metadata"]["name"] = RENAMED[name]
    return document


def grown(document: dict[str, Any]) -> int | None:
    """The size a user scales it to: its maxSize; None without room (no
    maxSize: the broker config lists ``size`` hosts)."""
    size, most = document["spec"]["size"], document["spec"].get("maxSize")
    return None if most is None or most <= size else int(most)


@dataclass
class Steps:
    """What the steps gave under one operator."""

    hosts: list[str]  # `flux run -N <size> hostname`, sorted
    scaled_hosts: list[str] | None  # the same after the scale (None: no room to scale)
    finished: str  # after `flux shutdown`: Succeeded or Failed (the Job's, or the resource's)
    events: list[str]  # "reason: message" of the events on the MiniCluster
    policy: str | None  # Fluxion's queue policy in the broker config (flux config get)


def _hosts(cluster: LocalCluster, admin: Api, namespace: str, name: str, nodes: int) -> list[str]:
    done = flux(cluster, admin, namespace, name, "run", "-N", str(nodes), "hostname")
    assert done is not None and done.returncode == 0, done and done.stderr
    return sorted(done.stdout.split())


def _policy(cluster: LocalCluster, admin: Api, namespace: str, name: str) -> str | None:
    done = flux(cluster, admin, namespace, name, "config", "get")
    assert done is not None and done.returncode == 0, done and done.stderr
    policy = json.loads(done.stdout).get("sched-fluxion-qmanager", {}).get("queue-policy")
    return None if policy is None else str(policy)


def _steps(cluster: LocalCluster, admin: Api, namespace: str, document: dict[str, Any], *,
           flux_operator: bool) -> Steps:  # fmt: skip
    name, size, bigger = document["metadata"]["name"], document["spec"]["size"], grown(document)

    def brokers(count: int) -> None:
        eventually(f"{name}: {count} brokers online",
                   lambda: online(cluster, admin, namespace, name) == count, 180, every=1)  # fmt: skip

    admin.create(MINICLUSTERS.format(namespace), document)
    brokers(size)
    hosts, scaled = _hosts(cluster, admin, namespace, name, size), None
    policy = _policy(cluster, admin, namespace, name)
    if bigger is not None:
        kubectl(cluster, "scale", "-n", namespace, "minicluster", name, "--replicas", str(bigger))
        brokers(bigger)
        scaled = _hosts(cluster, admin, namespace, name, bigger)
    flux(cluster, admin, namespace, name, "shutdown", "--quiet")
    if flux_operator:
        job = f"{KINDS['Job'].format(namespace)}/{name}"
        finished = eventually(f"{name}: its Job ended", lambda: job_finished(admin.get(job)), 120)
    else:
        path = f"{MINICLUSTERS.format(namespace)}/{name}"
        finished = eventually(
            f"{name}: Succeeded or Failed",
            lambda: next((kind for kind in ("Succeeded", "Failed")
                          if condition(admin.get(path), kind).get("status") == "True"), None),
            120)  # fmt: skip
    return Steps(hosts, scaled, str(finished), events_of(admin, namespace, name), policy)


@pytest.fixture(scope="module")
def both(
    cluster: LocalCluster,
    deployed: Path,  # noqa: F811  (the fixture imported above)
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, dict[str, Steps]]]:
    documents = {name: example(name) for name in EXAMPLES}

    def work(admin: Api, namespace: str, log: Callable[[], str], *,
             flux_operator: bool) -> dict[str, Steps]:  # fmt: skip
        return {key: _steps(cluster, admin, namespace, document, flux_operator=flux_operator)
                for key, document in documents.items()}  # fmt: skip

    upstream, mine = side_by_side(cluster, deployed, tmp_path_factory.mktemp("operator"), work)
    yield {"flux-operator": upstream, "fluxhop": mine}


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_steps_end_the_same_under_both(both: dict[str, dict[str, Steps]], name: str):
    document = example(name)
    host = document["metadata"]["name"]
    size, bigger = document["spec"]["size"], grown(document)
    for operator in ("flux-operator", "fluxhop"):
        steps = both[operator][name]
        assert steps.hosts == [f"{host}-{i}" for i in range(size)], (operator, steps)
        if bigger is not None:
            assert steps.scaled_hosts == [f"{host}-{i}" for i in range(bigger)], (operator, steps)
        assert steps.finished == "Succeeded", (operator, steps)


@pytest.mark.parametrize("name", UPSTREAM)
def test_a_view_that_cannot_serve_the_image_is_said_here_and_silent_there(
    both: dict[str, dict[str, Steps]], name: str
):
    ours = [e for e in both["fluxhop"][name].events if e.startswith("SpecWarning: ")]
    assert len(ours) == 1 and "glibc" in ours[0] and "flux-view-rocky:tag-9" in ours[0], ours
    assert not any("glibc" in e or "view" in e for e in both["flux-operator"][name].events)


def test_fluxion_s_queue_policy_is_easy_here_unless_asked_and_fcfs_there(
    both: dict[str, dict[str, Steps]],
):
    """Both write spec.flux.scheduler.queuePolicy into the broker config;
    unset, fluxhop chooses easy (a job larger than the brokers up waits
    rather than fails), the Flux Operator Fluxion's fcfs."""
    asked = "fluxion-queue-policy.yaml"
    assert both["flux-operator"][asked].policy == both["fluxhop"][asked].policy == "easy"
    for name in ("operator-managed.yaml", *UPSTREAM):
        assert both["flux-operator"][name].policy == "fcfs", name
        assert both["fluxhop"][name].policy == "easy", name
