"""The metrics an interactive MiniCluster serves (spec.metrics, on by
default there), scraped on the real cluster from rank 0's pod at each step -
idle, a job pending for a node that is not up (maxSize 3, size 2), a job
running, jobs canceled - equal what ``flux resource list`` and ``flux jobs``
say inside the same instance, and parse as Prometheus text; under Fluxion
and under sched-simple."""

from __future__ import annotations

import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.realflux.schedulers import Scheduler
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import flux_image_flags
from tests.realk8s.tools import InNamespace, eventually, scratch_namespace

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME = "watched"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Watched(InNamespace):
    def flux(self, *args: str) -> list[str]:
        return self.checked("proxy", NAME, "flux", *args).splitlines()

    def endpoint(self) -> str:
        pods = self.admin.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        lead = next(p for p in pods if p["metadata"]["labels"].get(
            "batch.kubernetes.io/job-completion-index") == "0")  # fmt: skip
        port = next(p["containerPort"] for c in lead["spec"]["containers"]
                    for p in c.get("ports", []) if p.get("name") == "metrics")  # fmt: skip
        return f"http://{lead['status']['podIP']}:{port}/metrics"

    def scrape(self) -> Samples:
        with urllib.request.urlopen(self.endpoint(), timeout=30) as reply:
            assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = reply.read().decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def online(self) -> float | None:
        """Brokers online as scraped, or None while nothing answers yet."""
        try:
            return self.scrape()[("flux_brokers", (("state", "online"),))]
        except (OSError, KeyError):
            return None

    def truth(self) -> Samples:
        """The same numbers, from the flux commands inside the instance."""
        found: Samples = {}
        for line in self.flux("resource", "list", "-no", "{state} {nnodes} {ncores}"):
            state, nodes, cores = line.split()
            found[("flux_nodes", (("state", state),))] = float(nodes)
            found[("flux_cores", (("state", state),))] = float(cores)
        states = Counter(
            line.strip().lower() for line in self.flux("jobs", "-A", "-a", "-no", "{state}")
        )
        for state in ("depend", "priority", "sched", "run", "cleanup", "inactive"):
            found[("flux_jobs", (("state", state),))] = float(states[state])
        pending = [int(n or 0) for n in self.flux("jobs", "-A", "-f", "pending", "-no", "{nnodes}")]
        found[("flux_pending_nodes", ())] = float(sum(pending))
        found[("flux_pending_max_nodes", ())] = float(max(pending, default=0))
        results = Counter(
            r.strip().lower() for r in self.flux("jobs", "-A", "-f", "inactive", "-no", "{result}")
        )
        found[("flux_jobs_result", (("result", "canceled"),))] = float(results["canceled"])
        return found

    def agree(self) -> None:
        truth = self.truth()
        scraped = self.scrape()
        assert {key: scraped.get(key) for key in truth} == truth


@pytest.fixture(scope="module")
def watched(cluster: LocalCluster, scheduler: Scheduler) -> Iterator[Watched]:
    """A namespace per scheduler."""
    with scratch_namespace(cluster) as (admin, namespace):
        yield Watched(cluster, admin, namespace)


def test_the_numbers_follow_the_queue(watched: Watched, scheduler: Scheduler):
    chosen = ["--sched-simple"] if scheduler.simple else []
    watched.checked("create", "--name", NAME, "-N", "2", "--max-size", "3",
                    *flux_image_flags(watched.cluster), *chosen)  # fmt: skip
    eventually("metrics served", lambda: watched.online() == 2, timeout=180)
    assert scheduler.loaded("\n".join(watched.flux("module", "list")))
    watched.agree()  # idle: 2 nodes free, rank 2 down
    assert watched.scrape()[("flux_nodes", (("state", "down"),))] == 1

    watched.checked("submit", NAME, "-N", "1", "--", "sleep", "600")
    eventually("a job running", lambda: watched.scrape()[("flux_jobs", (("state", "run"),))] == 1)
    watched.agree()
    assert watched.scrape()[("flux_nodes", (("state", "allocated"),))] == 1

    watched.checked(
        "submit", NAME, "-N", "3", "--", "true"
    )  # waits for rank 2 (and the node in use)
    eventually("the 3-node job pending", lambda: watched.scrape()[("flux_pending_nodes", ())] == 3)
    watched.agree()

    watched.flux("cancel", "--all")
    eventually(
        "both canceled",
        lambda: watched.scrape()[("flux_jobs_result", (("result", "canceled"),))] == 2,
    )
    watched.agree()
    watched.checked("delete", NAME)
