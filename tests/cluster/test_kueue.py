"""A queued MiniCluster against the fake API server with a stand-in Kueue:
created suspended, waits saying "waiting for admission by queue NAME" with
Kueue's reason, proceeds once admitted, and a timeout names the queue; once
admitted, its size changes only where Kueue would not restart it for that."""

from __future__ import annotations

import queue
import threading

import pytest

from fluxhop.cli import main
from fluxhop.cluster.api import Kube
from fluxhop.cluster.operations import MiniClusters
from fluxhop.errors import InputError, WaitTimeout
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.kueue import ELASTIC_ANNOTATION
from fluxhop.spec.placement import Placement
from tests.cluster.fakeapi import DEFAULT_CRDS, FakeAPIServer
from tests.cluster.fixtures import write_kubeconfig
from tests.cluster.kueue import Kueue

REASON = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default"


@pytest.fixture
def fake():  # this module's cluster runs Kueue
    server = FakeAPIServer(crds=DEFAULT_CRDS | {"Workload"})
    yield server
    server.close()


def queued(size: int = 2, *, max_size: int | None = None, elastic: bool = False, up: bool = False):
    spec = minicluster_from_flags(
        ["hostname"],
        image="ubuntu:noble",
        nodes=size,
        name="demo",
        max_size=max_size,
        placement=Placement(queue="team-a"),
    )
    if elastic:
        spec.metadata.annotations[ELASTIC_ANNOTATION] = "true"
    spec.spec.interactive = up  # an interactive instance stays up until deleted
    return spec


class Watcher:
    """Runs a wait in a thread and hands its progress lines over, so that a
    test acts (as Kueue) only once the wait has seen what it waits for."""

    def __init__(self, wait, *args, **kwargs) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.result: queue.Queue[object] = queue.Queue()
        kwargs["on_progress"] = lambda progress: self.lines.put(progress.summary())

        def run() -> None:
            try:
                self.result.put(wait(*args, **kwargs))
            except BaseException as err:
                self.result.put(err)

        threading.Thread(target=run, daemon=True).start()

    def until(self, text: str) -> str:
        while True:
            line = self.lines.get(timeout=60)
            if text in line:
                return line

    def outcome(self):
        return self.result.get(timeout=60)


@pytest.mark.parametrize(("target", "kind"), [("job", "Job"), ("jobset", "JobSet")])
def test_a_queued_minicluster_waits_for_admission_then_comes_up(ops, fake, target, kind):
    kueue = Kueue(fake)
    root = ops.create(queued(up=True), target)  # stays Running until deleted
    assert root.suspended and root.queue == "team-a"
    fake.reconcile()
    assert fake.objects(kinds=("Pod",)) == []  # nothing runs before admission
    assert ops.status(root).state == "Queued"
    watcher = Watcher(ops.wait_ready, root, timeout=60)
    assert watcher.until("waiting for admission by queue team-a") == (
        "waiting for admission by queue team-a"
    )
    kueue.pending(kind, "demo", REASON)
    assert watcher.until(REASON) == f"waiting for admission by queue team-a: {REASON}"
    kueue.admit(kind, "demo")
    progress = watcher.outcome()
    assert not isinstance(progress, BaseException), progress
    assert progress.admission is None and progress.running == 2
    assert ops.status(ops.require("demo")).state == "Running"


def test_a_timeout_names_the_queue_and_kueues_reason(ops, fake):
    kueue = Kueue(fake)
    root = ops.create(queued(), "job")
    kueue.pending("Job", "demo", REASON)
    with pytest.raises(WaitTimeout) as err:
        ops.wait_ready(root, timeout=0.2)
    assert str(err.value) == (
        f"timed out after 0.2s waiting for admission by queue team-a: {REASON} "
        "(kubectl describe localqueue team-a shows why)"
    )


def test_without_kueue_installed_the_wait_still_names_the_queue(tmp_path):
    server = FakeAPIServer()  # no Workload API: Kueue's reason cannot be read
    client = Kube.connect(str(write_kubeconfig(tmp_path / "kc")), transport=server.transport())
    try:
        plain = MiniClusters(client)
        root = plain.create(queued(), "job")
        with pytest.raises(WaitTimeout, match=r"waiting for admission by queue team-a \("):
            plain.wait_ready(root, timeout=0.2)
    finally:
        client.close()
        server.close()


def test_run_shows_the_wait_and_fails_naming_the_queue(cli_cluster, kubeconfig, capsys):
    Kueue(cli_cluster)
    code = main(
        [
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--name",
            "demo",
            "-N",
            "2",
            "--image",
            "ubuntu",
            "--queue",
            "team-a",
            "--timeout",
            "0.3",
            "--",
            "hostname",
        ]
    )
    err = capsys.readouterr().err
    assert code != 0
    assert "fluxhop: demo: waiting for admission by queue team-a" in err
    assert "timed out after 0.3s waiting for admission by queue team-a" in err
    assert cli_cluster.objects() == []  # run cleans up what it created


def running_pods(fake) -> int:
    fake.reconcile()
    return sum(p["status"]["phase"] in ("Pending", "Running") for p in fake.objects(kinds=("Pod",)))


@pytest.fixture
def admitted(ops, fake):
    """Create a queued MiniCluster (room to grow to 4), admitted with 2 pods."""

    def admitted(**options):
        kueue = Kueue(fake)
        ops.create(queued(2, max_size=4, up=True, **options), "job")
        kueue.admit("Job", "demo")
        assert running_pods(fake) == 2
        return kueue

    return admitted


def test_kueue_restarts_an_admitted_job_whose_size_changes(admitted, fake, kube):
    """Why fluxhop refuses: a size change behind its back makes Kueue stop the Job."""
    kueue = admitted()
    kube.merge_patch("Job", "demo", {"spec": {"parallelism": 3, "completions": 3}})
    kueue.observe("Job", "demo")
    assert fake.get("Job", "demo")["spec"]["suspend"] is True
    assert running_pods(fake) == 0  # every broker gone, back in the queue


def test_scaling_an_admitted_queued_minicluster_is_refused(admitted, fake, ops):
    kueue = admitted()
    with pytest.raises(InputError) as err:
        ops.scale(ops.require("demo"), 3)
    assert str(err.value) == (
        "MiniCluster demo was admitted by Kueue queue team-a, which stops a running Job "
        "whose size changes and queues it again (every broker restarts, its jobs are lost); "
        "delete it and create it with the new size, or annotate it kueue.x-k8s.io/elastic-job: "
        '"true" where Kueue runs ElasticJobsViaWorkloadSlices'
    )
    kueue.observe("Job", "demo")
    job = fake.get("Job", "demo")
    assert job["spec"]["parallelism"] == 2 and job["spec"]["suspend"] is False
    assert running_pods(fake) == 2


def test_an_elastic_job_is_scaled_in_place(admitted, fake, ops):
    kueue = admitted(elastic=True)
    assert ops.scale(ops.require("demo"), 3).size == 3
    kueue.observe("Job", "demo")
    assert fake.get("Job", "demo")["spec"]["suspend"] is False
    assert running_pods(fake) == 3


def test_a_minicluster_still_in_the_queue_can_be_resized(ops, fake):
    kueue = Kueue(fake)
    root = ops.create(queued(2, max_size=4, up=True), "job")
    assert ops.scale(root, 3).size == 3  # Kueue makes it a new Workload of 3
    kueue.admit("Job", "demo")
    assert running_pods(fake) == 3


def test_fluxhop_scale_says_so_in_one_line(admitted, cli_cluster, kubeconfig, capsys):
    admitted()
    code = main(["scale", "demo", "--size", "3", "--kubeconfig", str(kubeconfig)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("fluxhop: MiniCluster demo was admitted by Kueue queue team-a")
    assert cli_cluster.get("Job", "demo")["spec"]["parallelism"] == 2


def test_a_preempted_minicluster_has_not_ended_and_runs_again_once_admitted(ops, fake):
    """Kueue takes an admitted MiniCluster back: its rank 0 exits 143, which
    is not the job's end; admitted again, a new rank 0 runs the job."""
    fake.runner = lambda pod, index: None if index == 0 else ([], 0)  # runs until stopped
    kueue = Kueue(fake)
    root = ops.create(queued(2), "job")
    kueue.admit("Job", "demo")
    lead = ops.wait_lead_started(root, timeout=60)["metadata"]["name"]
    kueue.preempt("Job", "demo")
    assert ops.wait_lead_end(root, lead, timeout=60) is None
    fake.runner = lambda pod, index: ([], 4) if index == 0 else ([], 0)
    watcher = Watcher(ops.wait_lead_started, root, timeout=60, other_than=lead)
    watcher.until("waiting for admission by queue team-a")
    kueue.admit("Job", "demo")
    again = watcher.outcome()
    assert not isinstance(again, BaseException), again
    assert ops.wait_lead_end(root, again["metadata"]["name"], timeout=60) == 4
