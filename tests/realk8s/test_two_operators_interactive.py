"""fluxhop's own MiniCluster examples that wait for work, under both
operators (issue #35 item 3): ``examples/operator-managed.yaml`` says it
runs unchanged under the Flux Operator, and so should
``examples/interactive-ensemble.yaml``. Each is taken through the steps of
its header as a user types them: every broker up, a job on every node,
``kubectl scale minicluster`` to 3 (within maxSize), a job on the 3 nodes,
``flux shutdown`` - first under the Flux Operator, then, in another
namespace once it has stopped, under ``fluxhop operator`` (never both at
once: see test_two_operators.py). Flux is reached in rank 0 as fluxhop's
own verbs reach it (tests/realk8s/inside.py)."""

from __future__ import annotations

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
from tests.realk8s.outcomes import KINDS, MINICLUSTERS, job_finished
from tests.realk8s.sides import side_by_side
from tests.realk8s.test_operator import condition, deployed  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, kubectl

pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]

EXAMPLES = ("operator-managed.yaml", "interactive-ensemble.yaml")


@dataclass
class Steps:
    """What the header's steps gave under one operator."""

    hosts: list[str]  # `flux run -N 2 hostname`, sorted
    scaled_hosts: list[str]  # `flux run -N 3 hostname` after the scale, sorted
    finished: str  # after `flux shutdown`: Succeeded or Failed (the Job's, or the resource's)


def _hosts(cluster: LocalCluster, admin: Api, namespace: str, name: str, nodes: int) -> list[str]:
    done = flux(cluster, admin, namespace, name, "run", "-N", str(nodes), "hostname")
    assert done is not None and done.returncode == 0, done and done.stderr
    return sorted(done.stdout.split())


def _steps(cluster: LocalCluster, admin: Api, namespace: str, document: dict[str, Any], *,
           flux_operator: bool) -> Steps:  # fmt: skip
    name = document["metadata"]["name"]
    admin.create(MINICLUSTERS.format(namespace), document)
    eventually(f"{name}: 2 brokers online",
               lambda: online(cluster, admin, namespace, name) == 2, 180, every=1)  # fmt: skip
    hosts = _hosts(cluster, admin, namespace, name, 2)
    kubectl(cluster, "scale", "-n", namespace, "minicluster", name, "--replicas", "3")
    eventually(f"{name}: 3 brokers online",
               lambda: online(cluster, admin, namespace, name) == 3, 180, every=1)  # fmt: skip
    scaled = _hosts(cluster, admin, namespace, name, 3)
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
    return Steps(hosts, scaled, str(finished))


@pytest.fixture(scope="module")
def both(
    cluster: LocalCluster,
    deployed: Path,  # noqa: F811  (the fixture imported above)
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, dict[str, Steps]]]:
    documents = {name: yaml.safe_load((REPO / "examples" / name).read_text()) for name in EXAMPLES}

    def work(admin: Api, namespace: str, log: Callable[[], str], *,
             flux_operator: bool) -> dict[str, Steps]:  # fmt: skip
        return {key: _steps(cluster, admin, namespace, document, flux_operator=flux_operator)
                for key, document in documents.items()}  # fmt: skip

    upstream, mine = side_by_side(cluster, deployed, tmp_path_factory.mktemp("operator"), work)
    yield {"flux-operator": upstream, "fluxhop": mine}


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_headers_steps_end_the_same_under_both(both: dict[str, dict[str, Steps]], example: str):
    name = yaml.safe_load((REPO / "examples" / example).read_text())["metadata"]["name"]
    for operator in ("flux-operator", "fluxhop"):
        steps = both[operator][example]
        assert steps.hosts == [f"{name}-0", f"{name}-1"], (operator, steps)
        assert steps.scaled_hosts == [f"{name}-0", f"{name}-1", f"{name}-2"], (operator, steps)
        assert steps.finished == "Succeeded", (operator, steps)
