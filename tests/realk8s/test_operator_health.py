"""spec.health under ``fluxhop operator`` on the real cluster, with real
Flux and Fluxion: the operator (deploy/'s ServiceAccount, its ClusterRole
enforced by the real API server) looks at a MiniCluster resource's health
through rank 0's metrics. A check made to fail on rank 1 (a file flipped in
its pod) drains that rank in the pod; the resource's status.health then
names the rank and the failing check, and a Drained event says it; the
check passing again undrains the rank, and a Recovered event says so.

With ``onFailure: replace``, a drained rank's pod is left alone while a job
runs on it; once the job ends, the operator taints its node, evicts it (a
Replaced event), and the Job's new pod runs on another node, its broker
joins, its check passes, it is undrained, and the job that waited for both
nodes runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.replacing import lift_unhealthy_taints, running_pod
from tests.realk8s.test_operator import Operator, deployed  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, fluxhop

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME = "healthy"
SICK = 'test ! -e /tmp/sick || { echo "a sick file"; exit 1; }'  # /tmp: the pod's own
REASON = "health: sick: a sick file"


@pytest.fixture
def operator(
    cluster: LocalCluster,
    deployed: Path,  # noqa: F811
    namespace: str,
    tmp_path: Path,
) -> Iterator[Operator]:
    running = Operator(cluster, deployed, namespace, tmp_path / "operator.log",
                       "--health-interval", "1")  # fmt: skip
    yield running
    running.stop()


UNHEALTHY = "fluxhop.flux-framework.org/unhealthy"


def events(admin: Api, namespace: str) -> list[tuple[str, str]]:
    found = admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [(e["reason"], e["message"]) for e in found
            if e["involvedObject"].get("kind") == "MiniCluster"]  # fmt: skip


def test_a_drain_and_its_recovery_show_on_the_resource(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    doc = minicluster_doc(NAME, size=3, interactive=True, containers=[{"image": "host"}],
                          flux={"container": {"disable": True}},
                          health={"checks": [{"name": "sick", "command": SICK,
                                              "intervalSeconds": 2}]})  # fmt: skip
    doc = placed_minicluster(cluster, doc)
    path = f"{MINICLUSTERS.format(namespace)}/{NAME}"
    admin.create(MINICLUSTERS.format(namespace), doc)

    def resource() -> dict[str, Any]:
        return admin.get(path)

    def flux(*args: str) -> None:
        done = fluxhop(cluster, "proxy", "--namespace", namespace, NAME, "flux", *args)
        assert done.returncode == 0, done.stderr

    def until(what: str, check: Any) -> Any:
        try:
            return eventually(what, check, timeout=180)
        except AssertionError as error:
            raise AssertionError(f"{error}\noperator log:\n{operator.tail()}") from None

    until("every check passing on 3 ranks",
          lambda: (resource().get("status") or {}).get("health", {}).get("checks")
          == [{"name": "sick", "passing": 3, "failing": 0}])  # fmt: skip
    flux("exec", "-r", "1", "touch", "/tmp/sick")
    health = until("rank 1 drained, in status.health",
                   lambda: (h := resource()["status"]["health"])["drained"] and h)  # fmt: skip
    assert health["drained"] == [{"rank": 1, "reason": REASON}]
    assert health["checks"] == [{"name": "sick", "passing": 2, "failing": 1, "failingRanks": "1",
                                 "lastFailure": "a sick file"}]  # fmt: skip
    until("a Drained event", lambda: ("Drained", f"rank 1 drained: {REASON}")
          in events(admin, namespace))  # fmt: skip
    flux("exec", "-r", "1", "rm", "/tmp/sick")
    until("a Recovered event",
          lambda: ("Recovered", "rank 1 is no longer drained by its health checks")
          in events(admin, namespace))  # fmt: skip
    assert resource()["status"]["health"]["drained"] == []
    admin.delete(path)
    until("the resource gone", lambda: NAME not in str(admin.get(MINICLUSTERS.format(namespace))))


def test_a_drained_rank_is_replaced_on_another_node_once_its_job_ends(
    cluster: LocalCluster, admin: Api, namespace: str, operator: Operator
):
    check = {"name": "sick", "command": SICK, "intervalSeconds": 2, "timeoutSeconds": 5}
    grace = 2 + 5 + 10  # the operator leaves a pod this long after it started
    doc = minicluster_doc(NAME, size=2, interactive=True, containers=[{"image": "host"}],
                          flux={"container": {"disable": True}},
                          health={"onFailure": "replace", "checks": [check]})  # fmt: skip
    doc = placed_minicluster(cluster, doc)
    path = f"{MINICLUSTERS.format(namespace)}/{NAME}"
    admin.create(MINICLUSTERS.format(namespace), doc)

    def health() -> dict[str, Any]:
        return (admin.get(path).get("status") or {}).get("health") or {}

    def flux(*args: str) -> str:
        done = fluxhop(cluster, "proxy", "--namespace", namespace, NAME, "flux", *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def rank1() -> dict[str, Any] | None:
        return running_pod(admin, namespace, NAME, 1)

    def until(what: str, check: Any) -> Any:
        try:
            return eventually(what, check, timeout=240)
        except AssertionError as error:
            raise AssertionError(f"{error}\noperator log:\n{operator.tail()}") from None

    try:
        until("both ranks passing", lambda: health().get("checks")
              == [{"name": "sick", "passing": 2, "failing": 0}])  # fmt: skip
        busy = flux("submit", "-N1", "--requires=rank:1", "sleep", "300")
        flux("job", "wait-event", "-t", "60", busy, "start")
        first = rank1()
        assert first is not None
        flux("exec", "-r", "1", "touch", "/tmp/sick")
        until("rank 1 drained", lambda: health().get("drained") == [{"rank": 1, "reason": REASON}])
        started = first["status"]["startTime"]
        # past its grace and a few looks: a rank with a running job is not touched
        until("rank 1's pod past its grace", lambda: _age(started) > grace + 5)
        assert "Replaced" not in [reason for reason, _ in events(admin, namespace)]
        assert rank1()["metadata"]["uid"] == first["metadata"]["uid"]  # type: ignore[index]
        wide = flux("submit", "-N2", "true")  # waits for the drained rank
        flux("cancel", busy)
        replaced = until("a Replaced event", lambda: [m for r, m in events(admin, namespace)
                                                      if r == "Replaced"])  # fmt: skip
        old_node = first["spec"]["nodeName"]
        assert (
            f"rank 1's pod {first['metadata']['name']} evicted from node {old_node}" in replaced[0]
        )
        node = admin.get(f"/api/v1/nodes/{old_node}")
        assert {"key": UNHEALTHY, "value": NAME, "effect": "NoSchedule"} in node["spec"]["taints"]
        new = until("a new rank 1 running", lambda: (p := rank1()) is not None
                    and p["metadata"]["uid"] != first["metadata"]["uid"] and p)  # fmt: skip
        assert new["spec"]["nodeName"] != old_node
        until("rank 1 undrained by its new pod's check", lambda: health().get("drained") == [])
        flux("job", "wait-event", "-t", "120", wide, "clean")
        assert flux("jobs", "-no", "{result}", wide) == "COMPLETED"
        assert ("Recovered", "rank 1 is no longer drained by its health checks") in events(
            admin, namespace)  # fmt: skip
    finally:
        lift_unhealthy_taints(admin)
        admin.delete(path)
        until(
            "the resource gone", lambda: NAME not in str(admin.get(MINICLUSTERS.format(namespace)))
        )


def _age(stamp: str) -> float:
    started = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return (datetime.now(UTC) - started).total_seconds()
