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
import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluxhop.flux import idset
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.disturbances import (
    FINISHED,
    Edited,
    LostLead,
    edit,
    edited_while_running,
    lose_the_lead,
)
from tests.realk8s.images.build import FLUX_IMAGE, MPI_IMAGE
from tests.realk8s.outcomes import (
    KINDS,
    MINICLUSTERS,
    Outcome,
    events_of,
    job_finished,
    run,
    upstream_example,
)
from tests.realk8s.placing import on_real_nodes
from tests.realk8s.sides import side_by_side
from tests.realk8s.test_operator import condition, deployed  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, fluxhop, pod_manifest

# the module's fixture runs every case under both operators (about 4 minutes here)
pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]

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


def _upstream(name: str, size: int = 2) -> dict[str, Any]:
    document = upstream_example(f"tests__{name}__minicluster.yaml")
    document["spec"]["size"] = size
    return document


def _with_image(document: dict[str, Any], image: str) -> dict[str, Any]:
    for container in document["spec"]["containers"]:
        container["image"] = image
    return document


def _limited(command: str, cpu: int) -> dict[str, Any]:
    document = _command(command)
    document["spec"]["containers"][0]["resources"] = {"limits": {"cpu": cpu}}
    return document


def cases(cluster: LocalCluster, directory: Path) -> dict[str, dict[str, Any]]:
    named = {
        "hello-world": upstream_example("tests__hello-world__minicluster.yaml"),
        # the view disabled: Flux must be in the application image, in /usr
        # (the Flux Operator mounts an emptyDir over /opt/software in every pod)
        "view-disabled": _with_image(_hello(flux={"container": {"disable": True}}), FLUX_IMAGE),
        # no quotes: the Flux Operator splits a command on spaces, quotes and all
        "exit-124": _command(FAILING),
        "exit-124-strict": _command(FAILING, logging={"quiet": True, "strict": True}),
        "argv": _command(ARGV_COMMAND),
        "fluxhop-render": rendered(cluster, directory),
        # more of upstream's own tests
        "post": _upstream("post"),
        "debug": _upstream("debug"),
        "emptydir": _upstream("emptydir"),
        # logging.timed runs /usr/bin/time, which ubuntu:noble has not: an image with it
        "timed": _with_image(_upstream("timed"), MPI_IMAGE),
        "minimal-service": _upstream("minimal-service"),  # 4 tasks on 2 nodes
        # pods limited to one CPU, on nodes of more: what each writes into R
        "cpu-limit": _limited("flux resource R", cpu=1),
        FINISHED: _hello(maxSize=3),  # resized once it has ended (below)
    }
    for key, document in named.items():
        document["metadata"]["name"] = key  # one namespace holds them all
    # on the real nodes, in the images the examples name (built here)
    return {key: on_real_nodes(cluster, document) for key, document in named.items()}


@dataclass
class Session:
    """What one operator made of every case, in a namespace of its own."""

    outcomes: dict[str, Outcome]
    bystander: dict[str, str]  # the labels of a pod of nobody's MiniCluster, at the end
    invalid: dict[str, Any]  # an invalid MiniCluster (maxSize < size) once the operator saw it
    invalid_events: list[str]  # the events about it
    invalid_jobs: list[str]
    finished: Edited  # FINISHED, grown from 2 to 3 after it ended
    edited: Edited  # EDITED, its command changed while it ran, then grown to 3
    lost: LostLead  # LOST, its rank 0 pod evicted while it waited for work
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
    jobs = admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
    invalid_events = events_of(admin, namespace, INVALID)
    logged = log()  # what it said of the cases and the invalid one
    eventually(f"{FINISHED}: its Job Complete",
               lambda: job_finished(admin.get(f"{KINDS['Job'].format(namespace)}/{FINISHED}")))  # fmt: skip
    finished = edit(admin, namespace, FINISHED, [{"size": 3}], flux_operator=flux_operator)
    edited = edited_while_running(admin, namespace, on_real_nodes(cluster, _command("sleep 300", maxSize=3)),
                                  flux_operator=flux_operator)  # fmt: skip
    lost = lose_the_lead(cluster, admin, namespace,
                         on_real_nodes(cluster, _hello(interactive=True, logging={})))  # fmt: skip
    return Session(
        outcomes,
        admin.get(f"/api/v1/namespaces/{namespace}/pods/bystander")["metadata"].get("labels") or {},
        admin.get(path),
        invalid_events,
        [j["metadata"]["name"] for j in jobs if j["metadata"]["name"] == INVALID],
        finished,
        edited,
        lost,
        logged,
    )  # fmt: skip


VALIDATION_LOGGED = "did not validate"  # the Flux Operator's log line, its only word on it


@pytest.fixture(scope="module")
def two_operators(cluster: LocalCluster, deployed: Path, tmp_path_factory) -> Iterator[SideBySide]:  # noqa: F811
    documents = cases(cluster, tmp_path_factory.mktemp("cases"))

    def work(admin: Api, namespace: str, log: Callable[[], str], *, flux_operator: bool) -> Session:
        def saw_invalid(found: dict[str, Any]) -> bool:
            if flux_operator:
                return VALIDATION_LOGGED in log()
            return condition(found, "Failed").get("status") == "True"

        return _session(cluster, admin, namespace, documents, flux_operator=flux_operator,
                        saw_invalid=saw_invalid, log=log)  # fmt: skip

    upstream, mine = side_by_side(cluster, deployed, tmp_path_factory.mktemp("operator"), work)
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


def test_upstream_tests_end_the_same(two_operators: SideBySide):
    for key, says in (("post", "hello post"), ("debug", "hello world"),
                      ("emptydir", "/dev/shm"), ("timed", "hello world")):  # fmt: skip
        theirs, ours = (two_operators.flux_operator.outcomes[key],
                        two_operators.fluxhop.outcomes[key])  # fmt: skip
        assert theirs.finished == ours.finished == "Succeeded", (key, ours.events)
        assert says in theirs.rank0_log and says in ours.rank0_log, (key, ours.rank0_log)
    # commands.post runs on every rank, after the instance, under both
    for outcome in (two_operators.flux_operator, two_operators.fluxhop):
        post = outcome.outcomes["post"]
        assert post.rank0_log.index("hello world") < post.rank0_log.index("hello post")
        assert "hello post" in post.worker_log


def test_a_minimal_service_ends_the_same_and_fluxhop_says_it_keeps_its_own(
    two_operators: SideBySide,
):
    """upstream's minimal-service test: the Flux Operator's Service selects
    rank 0 only; fluxhop keeps one headless Service for every broker (its
    brokers find each other by name either way) and says it left the field out."""
    theirs, ours = (two_operators.flux_operator.outcomes["minimal-service"],
                    two_operators.fluxhop.outcomes["minimal-service"])  # fmt: skip
    assert theirs.finished == ours.finished == "Succeeded", (theirs.rank0_log, ours.events)
    assert theirs.rank0_log.count("hello-world") == ours.rank0_log.count("hello-world") == 4
    said = [e for e in ours.events if e.startswith("SpecWarning: ")]
    assert len(said) == 1 and "spec.flux.minimalService" in said[0], ours.events
    assert not any(e.startswith("SpecWarning") for e in theirs.events)


def test_a_field_fluxhop_leaves_out_is_said_here(two_operators: SideBySide):
    # logging.timed: the Flux Operator times its flux start and submit
    assert "FLUXTIME" in two_operators.flux_operator.outcomes["timed"].rank0_log
    ours = two_operators.fluxhop.outcomes["timed"]
    warned = [e for e in ours.events if e.startswith("SpecWarning: ")]
    assert len(warned) == 1 and "spec.logging.timed is ignored" in warned[0], ours.events
    assert not any(e.startswith("SpecWarning: ")
                   for e in two_operators.fluxhop.outcomes["post"].events)  # fmt: skip


def _cores_per_node(log: str) -> set[int]:
    """The cores R gives each node, from ``flux resource R``'s line."""
    document = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
    return {idset.count(entry["children"]["core"])
            for entry in document["execution"]["R_lite"]}  # fmt: skip


def _machine_cores() -> int:
    """This machine's cores (as hwloc counts them: a core, not a thread)."""
    topology = Path("/sys/devices/system/cpu")
    return len({(cpu / "topology/physical_package_id").read_text() + (cpu / "topology/core_id").read_text()
                for cpu in topology.glob("cpu[0-9]*") if (cpu / "topology/core_id").exists()})  # fmt: skip


def test_r_is_what_the_pods_have_here_and_the_first_ranks_hwloc_there(two_operators: SideBySide):
    # pods limited to 1 CPU: the Flux Operator's R is `flux R encode --local`,
    # each rank's own hwloc view (this machine's CPUs) repeated for every host
    if _machine_cores() < 2:
        pytest.skip("one core here: a limit of 1 CPU and this machine's hwloc look alike")
    theirs = two_operators.flux_operator.outcomes["cpu-limit"]
    ours = two_operators.fluxhop.outcomes["cpu-limit"]
    assert theirs.finished == ours.finished == "Succeeded", (
        theirs.rank0_log[-2000:], ours.rank0_log[-2000:], ours.events)  # fmt: skip
    assert _cores_per_node(ours.rank0_log) == {1}
    assert _cores_per_node(theirs.rank0_log) == {_machine_cores()}


def test_a_finished_minicluster_is_resized_silently_there_and_refused_here(
    two_operators: SideBySide,
):
    theirs, ours = two_operators.flux_operator.finished, two_operators.fluxhop.finished
    # the Flux Operator patches the ended Job: Kubernetes takes it and starts nothing
    assert (theirs.parallelism, theirs.completed, theirs.pods) == (3, True, 2)
    assert condition(theirs.resource, "SpecApplied") == {} and not theirs.events
    assert (ours.parallelism, ours.completed, ours.pods) == (2, True, 2)
    refused = condition(ours.resource, "SpecApplied")
    assert refused["reason"] == "ResizeRefused" and "has succeeded" in refused["message"]
    assert any(e.startswith("ResizeRefused: ") for e in ours.events), ours.events


def test_an_edit_a_running_minicluster_cannot_take_is_dropped_there_and_said_here(
    two_operators: SideBySide,
):
    theirs, ours = two_operators.flux_operator.edited, two_operators.fluxhop.edited
    # the Flux Operator never writes its scripts again: the old command stays,
    # the size (the only edit it takes) is applied, and nothing says so
    assert "sleep 300" in theirs.scripts_after and "echo edited" not in theirs.scripts_after
    assert theirs.scripts_after == theirs.scripts_before and theirs.parallelism == 3
    assert condition(theirs.resource, "SpecApplied") == {} and not theirs.events
    refused = condition(ours.resource, "SpecApplied")
    assert refused["reason"] == "SpecChangeRefused", ours.resource.get("status")
    assert "delete the MiniCluster" in refused["message"] and ours.parallelism == 2
    assert any(e.startswith("SpecChangeRefused: ") for e in ours.events), ours.events


RESTART = re.compile(r"restart \d+ of \d+ in (\d+)s")


def test_a_worker_waits_a_fixed_15_s_there_for_a_lost_lead_and_a_short_backoff_here(
    two_operators: SideBySide,
):
    theirs, ours = two_operators.flux_operator.lost, two_operators.fluxhop.lost
    print(f"both brokers online again after the new rank 0 ran: Flux Operator "
          f"{theirs.rejoined_after:.1f} s, fluxhop {ours.rejoined_after:.1f} s")  # fmt: skip
    # the Flux Operator's worker loop: a broker that exits sleeps 15 s, whatever happened
    assert "Sleeping 15s to try again" in theirs.worker_log, theirs.worker_log[-2000:]
    # fluxhop's: 1, 2, 4, then 8 s at most
    delays = [int(d) for d in RESTART.findall(ours.worker_log)]
    assert delays and max(delays) <= 8, ours.worker_log[-2000:]
