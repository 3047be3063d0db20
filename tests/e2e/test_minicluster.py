"""Real Flux on simulated pods: what fluxhop renders for its own targets boots,
runs the command on every rank, keeps argv and the exit code, serves an
interactive instance, starts elastic clusters on quorum and survives a worker
broker that dies."""

from __future__ import annotations

import os
import signal
import warnings

import pytest

from fluxhop.render import render
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc


def spec(command: list[str] | None, *, size: int = 4, **fields) -> MiniCluster:
    """A quiet MiniCluster whose Flux comes from the image (podsim's --flux-prefix)."""
    container: dict = {"image": "flux-in-the-host", **fields.pop("container", {})}
    if command is not None:
        container["command"] = command
    body = {
        "size": size,
        "interactive": command is None,
        "logging": {"quiet": True},
        "flux": {"container": {"disable": True}},
        "containers": [container],
        **fields,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return MiniCluster.from_dict(minicluster_doc("e2e", **body))


@pytest.mark.parametrize(
    ("target", "hosts"),
    [("job", "e2e-{}"), ("jobset", "e2e-node-0-{}")],
)
def test_hostname_on_four_ranks(simulate, target, hosts, scheduler):
    """One task per rank, each on a node of its own (fluxhop's --exclusive)."""
    flux = scheduler.flux(container={"disable": True})
    done = simulate(render(spec(["hostname"], flux=flux), target)).run()
    assert done.code == 0, done.explain()
    assert sorted(done.lead_lines()) == [hosts.format(i) for i in range(4)]


def test_the_exit_code_fails_the_job(simulate):
    objects = render(spec(["sh", "-c", "exit 3"], size=2), "job")
    job = (
        objects[-1]
        if objects[-1]["kind"] == "Job"
        else next(o for o in objects if o["kind"] == "Job")
    )
    assert job["spec"]["backoffLimit"] == 0  # podsim never retries; Kubernetes would not either
    done = simulate(objects).run()
    assert done.code == 1, done.explain()
    phase, containers = done.results()[next(p for p in done.results() if p.startswith("e2e-0-"))]
    assert (phase, containers) == ("Failed", "e2e=3")


def test_argv_arrives_word_for_word(simulate):
    argv = ["sh", "-c", 'printf "[%s]\\n" "$@" && echo done', "argv0", "a  b", "$(HOME)", "&&", "*"]
    done = simulate(render(spec(argv, size=1), "job")).run()
    assert done.code == 0, done.explain()
    assert done.lead_lines() == ["[a  b]", "[$(HOME)]", "[&&]", "[*]", "done"]


def test_interactive_instance_and_connect_sh(simulate):
    cluster = simulate(render(spec(None, size=2), "job")).start()
    connect = ["bash", "/etc/fluxhop/config/connect.sh"]
    cluster.wait_until(
        "the instance's env.sh", lambda: cluster.broker_pids(0) and cluster.broker_pids(1)
    )
    nodes = cluster.wait_until(
        "both brokers online",
        lambda: (
            (
                r := cluster.exec(
                    0, [*connect, "flux", "resource", "list", "-s", "free", "-no", "{nnodes}"]
                )
            ).stdout.strip()
            == "2"
            and r
        ),
    )
    assert nodes.returncode == 0
    overlay = cluster.exec(0, [*connect, "flux", "overlay", "status", "--summary"])
    assert "full" in overlay.stdout, overlay.stdout + overlay.stderr
    cluster.exec(0, [*connect, "flux", "shutdown", "--quiet"])
    done = cluster.wait()
    assert done.code == 0, done.explain()  # workers exit 0 when the instance shuts down


def test_elastic_cluster_starts_on_quorum(simulate):
    objects = render(spec(["hostname"], size=2, maxSize=4), "job")
    done = simulate(objects).run()
    assert done.code == 0, done.explain()
    assert sorted(done.lead_lines()) == ["e2e-0", "e2e-1"]
    assert len(done.results()) == 2  # parallelism is size: the other ranks never start


def test_a_killed_worker_broker_restarts_and_rejoins(simulate, workdir):
    """The lead runs two jobs on both nodes; between them the test kills rank
    1's broker, which its pod restarts; the second job runs once it rejoins."""
    script = (
        'flux run -N 2 -n 2 hostname && touch "$SYNC/first" && '
        'while [ ! -e "$SYNC/go" ]; do sleep 0.1; done && '
        "flux run -N 2 -n 2 hostname"
    )
    objects = render(
        spec(
            ["sh", "-c", script],
            size=2,
            container={"launcher": True, "environment": {"SYNC": str(workdir)}},
        ),
        "job",
    )
    cluster = simulate(objects).start()
    cluster.wait_until("the first job", lambda: (workdir / "first").exists())
    (old,) = cluster.broker_pids(1)
    os.kill(old, signal.SIGKILL)
    cluster.wait_until(
        "a new broker on rank 1",
        lambda: [p for p in cluster.broker_pids(1) if p != old],
        timeout=60,
    )
    (workdir / "go").touch()
    done = cluster.wait()
    assert done.code == 0, done.explain()
    assert sorted(done.lead_lines()) == ["e2e-0", "e2e-0", "e2e-1", "e2e-1"]
    assert done.results()[next(p for p in done.results() if p.startswith("e2e-1-"))][0] == (
        "Succeeded"
    )  # the restarted worker left with the instance, exit 0


def test_a_terminated_lead_of_an_interactive_instance_exits_with_the_signal(simulate):
    """The kubelet's SIGTERM to rank 0 (an eviction, a drain) is no end of
    the work: rank 0 exits 143, so the Job's podFailurePolicy replaces it
    rather than count the MiniCluster as Succeeded (its workers, left
    without their parent, join the new rank 0: tests/realk8s)."""
    cluster = simulate(render(spec(None, size=1), "job")).start()
    connect = ["bash", "/etc/fluxhop/config/connect.sh"]
    cluster.wait_until(
        "its broker online",
        lambda: (
            cluster.broker_pids(0)
            and cluster.exec(
                0, [*connect, "flux", "resource", "list", "-s", "free", "-no", "{nnodes}"]
            ).stdout.strip()
            == "1"
        ),
    )
    lead = cluster.entrypoint_pid(0)
    assert lead is not None
    os.kill(lead, signal.SIGTERM)
    done = cluster.wait()
    phase, containers = done.results()[next(p for p in done.results() if p.startswith("e2e-0-"))]
    assert (phase, containers) == ("Failed", "e2e=143"), done.explain()
