"""A MiniCluster created on a MultiKueue manager (issue #38 item 4), against
the fake API server with a stand-in MultiKueue (tests/cluster/multikueue.py):
its queue must exist; a queue that dispatches makes the resource MultiKueue's
(spec.managedBy) and refuses a Job or JobSet; ``fluxhop run`` waits with
Kueue's reason, says which worker took it, prints the output that came back
and exits with the job's code. The real thing: tests/realk8s/test_multikueue.py."""

from __future__ import annotations

import threading

import pytest

from fluxhop.cli import main
from fluxhop.errors import FluxhopWarning, InputError, WaitTimeout
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.placement import Placement
from tests.cluster.fakeapi import DEFAULT_CRDS, KUEUE_KINDS, RESOURCES, FakeAPIServer
from tests.cluster.multikueue import MultiKueue, multikueue_queue, worker_status
from tests.cluster.test_kueue import Watcher

REASON = "couldn't assign flavors to pod set brokers: insufficient quota for cpu"


@pytest.fixture
def fake():  # this module's cluster is a MultiKueue manager: Kueue's kinds are served
    server = FakeAPIServer(crds=DEFAULT_CRDS | KUEUE_KINDS)
    yield server
    server.close()


def queued(queue: str = "lq"):
    return minicluster_from_flags(["hostname"], image="ubuntu:noble", nodes=2, name="demo",
                                  placement=Placement(queue=queue))  # fmt: skip


def test_a_queue_that_does_not_exist_is_one_line_and_nothing_is_made(ops, fake):
    multikueue_queue(fake, "lq")
    with pytest.raises(InputError) as caught:
        ops.create(queued("nope"), "minicluster")
    said = str(caught.value)
    assert said.startswith("queue 'nope' (label kueue.x-k8s.io/queue-name): there is no ")
    assert "kubectl get localqueues -n default" in said and "\n" not in said
    assert fake.objects(kinds=("MiniCluster", "Job", "ConfigMap", "Secret")) == []


def test_a_dispatching_queue_makes_the_resource_multikueues(ops, fake):
    multikueue_queue(fake, "lq")
    root = ops.create(queued(), "minicluster")
    assert root.obj["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert root.dispatched and root.queue == "lq"


def test_a_queue_that_runs_here_leaves_the_resource_to_fluxhop_operator(ops, fake):
    multikueue_queue(fake, "lq", dispatching=False)
    root = ops.create(queued(), "minicluster")
    assert "managedBy" not in root.obj["spec"] and not root.dispatched


@pytest.mark.parametrize("target", ["job", "jobset"])
def test_a_job_or_jobset_on_a_dispatching_queue_is_refused(ops, fake, target):
    multikueue_queue(fake, "lq")
    with pytest.raises(InputError, match="use --target minicluster") as caught:
        ops.create(queued(), target)
    assert "without the ConfigMap, Secret and Service" in str(caught.value)
    assert fake.objects() == [o for o in fake.objects() if o["kind"] in KUEUE_KINDS]


def test_the_follow_says_why_it_waits_which_worker_took_it_and_how_it_ended(ops, fake):
    multikueue_queue(fake, "lq")
    mk = MultiKueue(fake)
    root = ops.create(queued(), "minicluster")
    notes: list[str] = []
    follow = Watcher(ops.follow_dispatched, root, on_note=notes.append, timeout=60)
    mk.hold("demo", REASON)
    follow.until(f"waiting for admission by queue lq: {REASON}")
    mk.dispatch("demo", "worker-1")
    assert follow.until("dispatched to worker cluster worker-1") == (
        "dispatched to worker cluster worker-1: 0/2 brokers up"
    )
    assert notes == ["dispatched by MultiKueue to worker cluster worker-1"]
    mk.report("demo", worker_status(up=2))
    follow.until("running on worker cluster worker-1: 2/2 brokers up")
    mk.give_back("demo", "Preempted on worker-1")  # taken back: queued again
    # its resource still has worker-1's last status (Ready): not news of the next
    assert follow.until("waiting for admission") == (
        "waiting for admission by queue lq: Preempted on worker-1"
    )
    assert notes[-1] == (
        "worker cluster worker-1 gave it back; waiting for admission by queue lq: "
        "Preempted on worker-1"
    )
    mk.dispatch("demo", "worker-2")
    mk.report("demo", worker_status(up=0, code=3, output="[a b][c]\n"))
    ended = follow.outcome()
    assert (ended.exit_code, ended.output, ended.cluster) == (3, "[a b][c]\n", "worker-2")
    assert ended.failure == "rank 0 exited with code 3"


def test_an_ended_job_waits_for_its_last_status(ops, fake):
    """Ended, but rank 0's output not back yet: the follow goes on until the
    Workload is finished (MultiKueue copies the last status before that)."""
    multikueue_queue(fake, "lq")
    mk = MultiKueue(fake)
    root = ops.create(queued(), "minicluster")
    follow = Watcher(ops.follow_dispatched, root, timeout=60)
    mk.dispatch("demo", "worker-1")
    follow.until("dispatched to worker cluster worker-1")
    mk.report("demo", worker_status(up=2))
    follow.until("running on worker cluster worker-1")
    mk.report("demo", worker_status(up=0, code=0))
    follow.until("dispatched to worker cluster worker-1: 0/2")  # over: no longer up
    assert follow.result.empty()
    mk.finish("demo")
    assert follow.outcome().exit_code == 0


def test_a_follow_that_times_out_says_what_it_waits_for(ops, fake):
    multikueue_queue(fake, "lq")
    root = ops.create(queued(), "minicluster")
    MultiKueue(fake).hold("demo", REASON)
    # the Workload was held before the follow began: its first list has the reason
    with pytest.raises(WaitTimeout, match=f"timed out after 3s .*{REASON}"):
        ops.follow_dispatched(root, timeout=3)


def test_fluxhop_run_follows_it_to_its_exit_code(cli_cluster, kubeconfig, capsys):
    multikueue_queue(cli_cluster, "lq")
    mk = MultiKueue(cli_cluster)

    def worker() -> None:  # MultiKueue and the worker, once fluxhop made the resource
        with cli_cluster.changed:
            cli_cluster.changed.wait_for(
                lambda: ("MiniCluster", "default", "mk") in cli_cluster.store, timeout=60
            )
        mk.dispatch("mk", "worker-1")
        mk.report("mk", worker_status(up=2))
        mk.report("mk", worker_status(up=0, code=3, output="[a b][c]"))

    threading.Thread(target=worker, daemon=True).start()
    code = main(["run", "--kubeconfig", str(kubeconfig), "--target", "minicluster", "--name",
                 "mk", "-N", "2", "--image", "ubuntu", "--queue", "lq", "--",
                 "sh", "-c", "exit 3"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 3, err
    assert out == "[a b][c]\n"
    assert "fluxhop: dispatched by MultiKueue to worker cluster worker-1" in err
    assert "failed on worker cluster worker-1: rank 0 exited with code 3" in err
    assert cli_cluster.objects(kinds=("MiniCluster",)) == []  # deleted once it ended


def test_fluxhop_create_wait_waits_until_it_runs_on_a_worker(cli_cluster, kubeconfig, capsys):
    multikueue_queue(cli_cluster, "lq")
    mk = MultiKueue(cli_cluster)

    def worker() -> None:
        with cli_cluster.changed:
            cli_cluster.changed.wait_for(
                lambda: ("MiniCluster", "default", "up") in cli_cluster.store, timeout=60
            )
        mk.dispatch("up", "worker-1")
        mk.report("up", worker_status(up=2))

    threading.Thread(target=worker, daemon=True).start()
    code = main(["create", "--kubeconfig", str(kubeconfig), "--target", "minicluster", "--name",
                 "up", "-N", "2", "--image", "ubuntu", "--queue", "lq", "--wait"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert "queue lq dispatches it to a worker cluster" in err
    assert "minicluster/up running on worker cluster worker-1" in err
    assert cli_cluster.objects(kinds=("MiniCluster",))  # left running


def test_a_worker_that_gave_it_back_restarts_the_wait(ops, fake):
    """worker-1's last status (brokers up) stays on the resource after a
    give-back: the wait is for a worker again, with its timeout."""
    multikueue_queue(fake, "lq")
    mk = MultiKueue(fake)
    root = ops.create(queued(), "minicluster")
    # a bound, not a guess: were worker-1's old status taken as news, the follow would wait forever
    follow = Watcher(ops.follow_dispatched, root, timeout=5)
    mk.dispatch("demo", "worker-1")
    mk.report("demo", worker_status(up=2))
    follow.until("running on worker cluster worker-1")
    mk.give_back("demo", "Preempted on worker-1")
    timed_out = follow.outcome()
    assert isinstance(timed_out, WaitTimeout), timed_out
    assert "waiting for admission by queue lq: Preempted on worker-1" in str(timed_out)


@pytest.mark.parametrize(
    ("decide", "said"),
    [
        (lambda mk: mk.finish("demo", reason="FailedToStart", message="cannot start: x"),
         "its Workload finished: cannot start: x"),
        (lambda mk: mk.reject("demo", "No multikueue adapter found"),
         "admission check multikueue rejected it: No multikueue adapter found"),
    ],
)  # fmt: skip
def test_kueue_ending_it_first_ends_the_follow(ops, fake, decide, said):
    multikueue_queue(fake, "lq")
    mk = MultiKueue(fake)
    root = ops.create(queued(), "minicluster")
    follow = Watcher(ops.follow_dispatched, root, timeout=60)
    mk.hold("demo", REASON)
    follow.until("waiting for admission")
    decide(mk)
    ended = follow.outcome()
    assert (ended.ended, ended.exit_code, ended.failure) == (True, 1, said)


def test_an_end_whose_output_never_comes_ends_after_a_while(ops, fake, monkeypatch):
    monkeypatch.setattr("fluxhop.cluster.dispatchwait.LAST_STATUS_WAIT", 0.3)
    multikueue_queue(fake, "lq")
    mk = MultiKueue(fake)
    root = ops.create(queued(), "minicluster")
    follow = Watcher(ops.follow_dispatched, root, timeout=60)
    mk.dispatch("demo", "worker-1")
    mk.report("demo", worker_status(up=0, code=2))  # no output, Workload never finished
    ended = follow.outcome()
    assert (ended.ended, ended.exit_code, ended.output) == (True, 2, "")


def test_a_manager_given_by_hand_on_a_dispatching_queue_is_refused(ops, fake):
    multikueue_queue(fake, "lq")
    spec = queued()
    spec.spec.managed_by = "fluxhop.io/operator"
    with pytest.raises(InputError, match=r"^spec.managedBy fluxhop.io/operator: queue 'lq' "):
        ops.create(spec, "minicluster")
    assert fake.objects(kinds=("MiniCluster",)) == []


def test_who_may_not_read_cluster_queues_is_told_what_to_write(ops, fake):
    multikueue_queue(fake, "lq")
    fake.rbac = [  # everything but ClusterQueues, as Kueue's batch-user role
        {"apiGroups": ["" if prefix == "api/v1" else prefix.split("/")[1]],
         "resources": [plural, f"{plural}/status"], "verbs": ["*"]}
        for prefix, plural in RESOURCES if plural != "clusterqueues"
    ]  # fmt: skip
    with pytest.warns(
        FluxhopWarning, match="may not read ClusterQueue cq-lq .* set spec.managedBy"
    ):
        root = ops.create(queued(), "minicluster")
    assert "managedBy" not in root.obj["spec"]
