"""spec.health under ``fluxhop operator`` on the real cluster, with real
Flux and Fluxion: the operator (deploy/'s ServiceAccount, its ClusterRole
enforced by the real API server) looks at a MiniCluster resource's health
through rank 0's metrics. A check made to fail on rank 1 (a file flipped in
its pod) drains that rank in the pod; the resource's status.health then
names the rank and the failing check, and a Drained event says it; the
check passing again undrains the rank, and a Recovered event says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.outcomes import MINICLUSTERS
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
