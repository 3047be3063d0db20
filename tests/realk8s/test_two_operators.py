"""The same MiniCluster YAML, two operators (issue #35): each case is
reconciled by the Flux Operator and then, in another namespace and after
the Flux Operator has stopped, by ``fluxhop operator``, both with real Flux
in the pods, and the records (tests/realk8s/outcomes.py) held side by side:
how each ended, the exit code as each reports it, rank 0's output, argv
with spaces and quotes, the objects each made.

The two never run at once: both watch ``miniclusters.flux-framework.org``,
and the Flux Operator watches every namespace. The module's fixture runs
every case under the Flux Operator first (started only once no MiniCluster
exists anywhere; every MiniCluster deleted before it stops), then under
fluxhop's operator, which watches its own namespace only.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.fluxoperator import FluxOperator
from tests.realk8s.outcomes import MINICLUSTERS, Outcome, run, upstream_example
from tests.realk8s.test_operator import Operator, condition, deployed  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, fluxhop, pod_manifest, scratch_namespace

pytestmark = pytest.mark.usefixtures("needs_flux")

# what a user writes, quotes and all; what each word must reach the program as
ARGV = ["a b", "c'd", 'e"f', "$HOME"]
ARGV_COMMAND = shlex.join(["printf", "[%s]\\n", *ARGV])
FAILING = "timeout 1 sleep 30"  # exits 124


def _hello(size: int = 2, **spec: Any) -> dict[str, Any]:
    document = upstream_example("tests__hello-world__minicluster.yaml")
    document["spec"].update(size=size, **spec)
    return document


def _command(command: str, **spec: Any) -> dict[str, Any]:
    document = _hello(**spec)
    document["spec"]["containers"][0]["command"] = command
    return document


def rendered(cluster: LocalCluster, directory: Path) -> dict[str, Any]:
    """``fluxhop render --target minicluster`` of a two-node MiniCluster."""
    source = directory / "rendered.yaml"
    loud = _command("echo hello from fluxhop")
    del loud["spec"]["logging"]  # not quiet: the Flux Operator's scripts say what they do
    source.write_text(yaml.safe_dump(loud))
    done = fluxhop(cluster, "render", "-f", str(source), "--target", "minicluster")
    assert done.returncode == 0, done.stderr
    (document,) = [d for d in yaml.safe_load_all(done.stdout) if d]
    document["metadata"].pop("namespace")
    return dict(document)


def cases(cluster: LocalCluster, directory: Path) -> dict[str, dict[str, Any]]:
    named = {
        "hello-world": upstream_example("tests__hello-world__minicluster.yaml"),
        "view-disabled": _hello(flux={"container": {"disable": True}}),
        # no quotes: the Flux Operator splits a command on spaces, quotes and all
        "exit-124": _command(FAILING),
        "exit-124-strict": _command(FAILING, logging={"quiet": True, "strict": True}),
        "argv": _command(ARGV_COMMAND),
        "fluxhop-render": rendered(cluster, directory),
    }
    for key, document in named.items():
        document["metadata"]["name"] = key  # one namespace holds them all
    return named


@dataclass
class Session:
    """What one operator made of every case, in a namespace of its own."""

    outcomes: dict[str, Outcome]
    bystander: dict[str, str]  # the labels of a pod of nobody's MiniCluster, at the end
    invalid: dict[str, Any]  # an invalid MiniCluster (maxSize < size) once the operator saw it
    invalid_events: list[str]  # the events about it
    invalid_jobs: list[str]
    log: str


@dataclass
class SideBySide:
    flux_operator: Session
    fluxhop: Session


INVALID = "invalid"


def _session(cluster: LocalCluster, admin: Api, namespace: str,
             documents: dict[str, dict[str, Any]], *, flux_operator: bool,
             saw_invalid: Callable[[dict[str, Any]], bool], log: Callable[[], str]) -> Session:  # fmt: skip
    admin.create(
        f"/api/v1/namespaces/{namespace}/pods", pod_manifest("bystander", ["sleep", "600"])
    )
    outcomes = {
        key: run(admin, namespace, copy.deepcopy(document), flux_operator=flux_operator)
        for key, document in documents.items()
    }
    invalid = _hello(maxSize=1)
    invalid["metadata"]["name"] = INVALID
    path = f"{MINICLUSTERS.format(namespace)}/{INVALID}"
    admin.create(MINICLUSTERS.format(namespace), invalid)
    eventually("the invalid MiniCluster seen", lambda: saw_invalid(admin.get(path)), 120)
    events = admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    jobs = admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    return Session(
        outcomes,
        admin.get(f"/api/v1/namespaces/{namespace}/pods/bystander")["metadata"].get("labels") or {},
        admin.get(path),
        [f"{e['reason']}: {e['message']}" for e in events
         if e["involvedObject"].get("name") == INVALID],
        [j["metadata"]["name"] for j in jobs if j["metadata"]["name"] == INVALID],
        log(),
    )  # fmt: skip


VALIDATION_LOGGED = "did not validate"  # the Flux Operator's log line, its only word on it


@pytest.fixture(scope="module")
def two_operators(cluster: LocalCluster, deployed: Path, tmp_path_factory) -> Iterator[SideBySide]:  # noqa: F811
    documents = cases(cluster, tmp_path_factory.mktemp("cases"))
    theirs = FluxOperator(cluster)
    try:
        theirs.start()
        with scratch_namespace(cluster) as (admin, namespace):
            upstream = _session(cluster, admin, namespace, documents, flux_operator=True,
                                saw_invalid=lambda _: VALIDATION_LOGGED in theirs.log(400),
                                log=lambda: theirs.log(400))  # fmt: skip
    finally:
        theirs.stop()
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with scratch_namespace(cluster) as (admin, namespace):
        ours = Operator(cluster, deployed, namespace, log)
        try:
            mine = _session(cluster, admin, namespace, documents, flux_operator=False,
                            saw_invalid=lambda found: condition(found, "Failed").get("status") == "True",
                            log=lambda: log.read_text(errors="replace"))  # fmt: skip
        finally:
            ours.stop()
    yield SideBySide(upstream, mine)


def test_hello_world_ends_the_same(two_operators: SideBySide):
    for key in ("hello-world", "view-disabled", "fluxhop-render"):
        theirs, ours = (
            two_operators.flux_operator.outcomes[key],
            two_operators.fluxhop.outcomes[key],
        )
        assert theirs.finished == ours.finished == "Succeeded", (
            key,
            two_operators.flux_operator.log[-3000:],
        )
        assert theirs.exit_code == ours.exit_code == 0


def test_the_flux_operator_accepts_and_completes_fluxhop_render(two_operators: SideBySide):
    theirs = two_operators.flux_operator.outcomes["fluxhop-render"]
    assert theirs.finished == "Succeeded"
    assert "hello from fluxhop" in theirs.rank0_log


def test_an_exit_code_is_lost_by_the_flux_operator_unless_strict(two_operators: SideBySide):
    theirs, ours = two_operators.flux_operator.outcomes, two_operators.fluxhop.outcomes
    assert (theirs["exit-124"].finished, theirs["exit-124"].exit_code) == ("Succeeded", 0)  # lost
    assert (ours["exit-124"].finished, ours["exit-124"].exit_code) == ("Failed", 124)
    # strict mode keeps the code, and the pod restarts in place (OnFailure, backoffLimit 100)
    assert (theirs["exit-124-strict"].finished, theirs["exit-124-strict"].exit_code) == (
        "Restarting",
        124,
    )
    assert (ours["exit-124-strict"].finished, ours["exit-124-strict"].exit_code) == ("Failed", 124)


def test_argv_with_spaces_and_quotes(two_operators: SideBySide):
    def printed(outcome: Outcome) -> list[str]:
        return [line for line in outcome.rank0_log.splitlines() if "[" in line]

    assert printed(two_operators.fluxhop.outcomes["argv"]) == [f"[{word}]" for word in ARGV]
    # the defect: the command goes through a string, split on spaces, quotes kept, $HOME expanded
    assert printed(two_operators.flux_operator.outcomes["argv"]) == [
        "'['a]", "''[b']", "''['c'\"d]", "''[ef']", "''['/root']",
    ]  # fmt: skip


def test_the_curve_key_is_in_a_configmap_there_and_in_a_secret_here(two_operators: SideBySide):
    theirs = two_operators.flux_operator.outcomes["hello-world"]
    assert any(
        "secret-key" in value for c in theirs.configmaps for value in (c.get("data") or {}).values()
    )
    ours = two_operators.fluxhop.outcomes["hello-world"]
    assert not any(
        "secret-key" in value for c in ours.configmaps for value in (c.get("data") or {}).values()
    )
    assert ours.objects["Secret"], ours.objects
    # and unless quiet, rank 0 prints it (the rendered MiniCluster is not quiet)
    assert "secret-key" in two_operators.flux_operator.outcomes["fluxhop-render"].rank0_log
    assert not any("secret-key" in o.rank0_log for o in two_operators.fluxhop.outcomes.values())


def test_the_flux_operator_labels_a_pod_of_nobody_s_minicluster(two_operators: SideBySide):
    assert "job-index" in two_operators.flux_operator.bystander  # the defect: an unscoped list
    assert "job-index" not in two_operators.fluxhop.bystander


def test_an_invalid_spec_is_only_logged_there_and_reported_here(two_operators: SideBySide):
    theirs, ours = two_operators.flux_operator, two_operators.fluxhop
    assert VALIDATION_LOGGED in theirs.log
    assert theirs.invalid_events == [] and theirs.invalid_jobs == []
    assert condition(theirs.invalid, "Failed") == {}  # no status says so: the user sees nothing
    failed = condition(ours.invalid, "Failed")
    assert failed["reason"] == "InvalidSpec" and "maxSize" in failed["message"], failed
    assert any(e.startswith("InvalidSpec: ") for e in ours.invalid_events), ours.invalid_events
    assert ours.invalid_jobs == []  # nothing half-made either


def test_the_end_is_on_the_minicluster_here_and_only_on_the_job_there(two_operators: SideBySide):
    theirs = two_operators.flux_operator.outcomes["hello-world"].resource
    ours = two_operators.fluxhop.outcomes["hello-world"].resource
    assert condition(theirs, "Succeeded") == {}
    assert condition(theirs, "JobFinished").get("status") == "False"  # never set, even when it is
    assert condition(ours, "Succeeded")["status"] == "True"
