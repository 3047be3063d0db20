"""A MiniCluster resource dispatched by Kueue's MultiKueue (issue #38 item 3):
created on a manager cluster (tests/realk8s/multikueue.py: a control plane
with the real Kueue v0.17.0, no nodes), run on the worker (the test cluster,
its own Kueue and ``fluxhop operator``) with real Flux in containers on its
real nodes, its status - phase,
exit code, the reason of a failure - back on the manager; deleted on the
manager, gone from the worker; a second worker whose API server never
answers is marked inactive and passed over. fluxhop operator runs on both:
on the manager it makes the resource's Workload and nothing else."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.controllers import Running
from tests.realk8s.multikueue import (
    GONE,
    WORKER,
    WORKER2,
    Manager,
    manager_of,
    queues_on_both,
    second_worker_of,
)
from tests.realk8s.outcomes import MINICLUSTERS
from tests.realk8s.placing import flux_image, flux_image_flags
from tests.realk8s.queues import (
    KUEUE,
    QUEUE_LABEL,
    condition,
    local_queue,
    workload_priority,
    workloads_of,
)
from tests.realk8s.test_operator import Operator, deployed, until  # noqa: F401  (fixture)
from tests.realk8s.tools import eventually, fluxhop

pytestmark = [pytest.mark.usefixtures("needs_flux"), pytest.mark.timeout(900)]
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


@pytest.fixture(scope="module")
def manager(cluster: LocalCluster, kueue: Running, deployed: Path) -> Iterator[Manager]:  # noqa: F811
    """The manager, once the worker serves MiniClusters (deploy/'s CRD)."""
    with manager_of(cluster) as running:
        yield running


@pytest.fixture
def both(cluster: LocalCluster, manager: Manager, deployed: Path,  # noqa: F811
         admin: Api, namespace: str, tmp_path: Path) -> Iterator[tuple[Operator, Operator]]:  # fmt: skip
    """The queue ``lq`` on both (the worker's preempts by priority), and
    fluxhop operator on each (manager, worker)."""
    with queues_on_both(manager, admin, namespace, "lq", {"cpu": "2"},
                        preemption={"withinClusterQueue": "LowerPriority"}):  # fmt: skip
        on_manager = Operator(manager.cluster, manager.operator_kubeconfig, namespace,
                              tmp_path / "manager.log")  # fmt: skip
        on_worker = Operator(cluster, deployed, namespace, tmp_path / "worker.log")
        try:
            yield on_manager, on_worker
        finally:
            on_manager.stop()
            on_worker.stop()


def dispatched(manager: Manager, name: str, command: str | None, *,
               managed_by: str | None = MULTIKUEUE, priority: str | None = None,
               ) -> dict[str, Any]:  # fmt: skip
    """Two brokers of one CPU on queue ``lq``; interactive without a command;
    an image with Flux, placed where the workers run it (their real nodes,
    when the first worker has them)."""
    image, placement = flux_image(manager.worker)
    container: dict[str, Any] = {"image": image, "resources": {"requests": {"cpu": "1"}}}
    spec: dict[str, Any] = {"size": 2, "flux": {"container": {"disable": True}},
                            "containers": [container]}  # fmt: skip
    if placement:
        spec["pod"] = copy.deepcopy(placement)
    if command is None:
        spec["interactive"] = True
    else:
        container["command"] = command
    if managed_by:
        spec["managedBy"] = managed_by
    labels = {QUEUE_LABEL: "lq"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": "flux-framework.org/v1alpha2",
        "kind": "MiniCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def run_on(manager: Manager, namespace: str, name: str,
           *flags: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``fluxhop run`` of two brokers on queue ``lq`` against the manager:
    rank 0 prints its argv and exits 3."""
    return fluxhop(manager.cluster, "run", "--target", "minicluster", "--namespace", namespace,
                   "--queue", "lq", "--cpu", "1", *flux_image_flags(manager.worker), "-N", "2",
                   "--name", name, *flags, "--", "sh", "-c",
                   'printf "[%s]" "a b" c; echo; exit 3', timeout=400)  # fmt: skip


def ended(api: Api, path: str) -> dict[str, Any] | None:
    cr = api.get(path)
    done = any(condition(cr, k).get("status") == "True" for k in ("Succeeded", "Failed"))
    return cr if done else None


@pytest.mark.parametrize("code", [0, 3])
def test_dispatched_to_the_worker_its_exit_shows_on_the_manager(
    manager: Manager, admin: Api, namespace: str, both: tuple[Operator, Operator], code: int
):
    _, on_worker = both
    path = f"{MINICLUSTERS.format(namespace)}/mk"
    with manager.admin() as api:
        command = f"""sh -c 'printf "[%s]" "a b" c; echo; exit {code}'"""
        api.create(MINICLUSTERS.format(namespace), dispatched(manager, "mk", command))
        # the worker's copy, MultiKueue's, run there by fluxhop operator (and
        # deleted by MultiKueue once it has ended: read while it runs)
        there = until("the worker's copy", on_worker, lambda: admin.find(path), 300)
        assert there["metadata"]["labels"].get("kueue.x-k8s.io/prebuilt-workload-name")
        assert "managedBy" not in there["spec"]
        mine = api.get(path)["metadata"].get("annotations") or {}
        assert not [k for k in mine if k.startswith("fluxhop.io/")], mine  # copied as it is
        here = until("the manager's copy ended", on_worker, lambda: ended(api, path), 300)
        assert here["status"]["exitCode"] == code, here["status"]
        # rank 0's output, on the manager that has no pods to read it from: argv intact
        assert "[a b][c]" in here["status"]["output"].splitlines(), here["status"]
        kind = "Succeeded" if code == 0 else "Failed"
        assert condition(here, kind)["status"] == "True"
        if code:
            assert condition(here, "Failed")["message"] == f"rank 0 exited with code {code}"
        # fluxhop on the manager: the state and exit code copied back; what
        # needs the pods says where they are
        shown = fluxhop(manager.cluster, "get", "mk", "--namespace", namespace, "-o", "json")
        assert shown.returncode == 0, shown.stderr
        said = json.loads(shown.stdout)["fluxhop"]
        assert (said["state"], said["exitCode"]) == ("Succeeded" if code == 0 else "Failed", code)
        logs = fluxhop(manager.cluster, "logs", "mk", "--namespace", namespace)
        assert logs.returncode != 0 and "runs on another cluster" in logs.stderr, logs.stderr
        # the manager has no Job, no pods: only the resource and its Workload
        jobs = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
        assert jobs == []
        # the worker that answers took it; the one that does not is inactive
        (workload,) = workloads_of(api, namespace, "mk")
        assert workload["status"].get("clusterName") == WORKER, workload["status"]
        gone = api.get(f"{KUEUE}/multikueueclusters/{GONE}")
        assert condition(gone, "Active")["status"] == "False", gone.get("status")
        # deleted on the manager, gone from the worker
        api.delete(path)
    eventually("the worker's copy gone", lambda: admin.find(path) is None, 120)
    eventually("its Job gone", lambda: admin.find(
        f"/apis/batch/v1/namespaces/{namespace}/jobs/mk") is None, 120)  # fmt: skip


def test_preempted_on_the_worker_it_is_queued_again_from_the_manager(
    manager: Manager, admin: Api, namespace: str, both: tuple[Operator, Operator]
):
    """A higher priority MiniCluster created on the worker preempts the
    dispatched one there: the worker's copy stops, the manager's Workload is
    evicted and its quota given back by fluxhop operator there, and Kueue
    dispatches it again; it runs once the quota is free."""
    on_manager, on_worker = both
    path = f"{MINICLUSTERS.format(namespace)}/low"
    with manager.admin() as api:
        for where in (api, admin):
            workload_priority(where, "fluxhop-test-low", 10)
            workload_priority(where, "fluxhop-test-high", 1000)
        api.create(
            MINICLUSTERS.format(namespace),
            dispatched(manager, "low", None, priority="fluxhop-test-low"),
        )
        until("low up on the worker", on_worker, lambda: condition(
            api.get(path), "Ready").get("status") == "True", 300)  # fmt: skip
        admin.create(MINICLUSTERS.format(namespace), dispatched(
            manager, "high", "true", managed_by=None, priority="fluxhop-test-high"))  # fmt: skip

        def requeued() -> dict[str, Any] | None:
            (workload,) = workloads_of(api, namespace, "low")
            said = condition(workload, "Evicted")
            came = said.get("status") == "True" or said.get("message", "").startswith("Previously")
            return workload if came else None

        workload = until("the manager's Workload evicted", on_worker, requeued, 180)
        # MultiKueue copied the worker's status back (Ready): the manager's
        # fluxhop operator takes it back, the resource says it waits again
        waits = until("low waiting again on the manager", on_manager, lambda: condition(
            api.get(path), "Ready").get("status") == "False" and api.get(path), 120)  # fmt: skip
        assert condition(waits, "Admitted").get("status") == "False", waits["status"]
        until("high Succeeded on the worker", on_worker, lambda: condition(admin.get(
            f"{MINICLUSTERS.format(namespace)}/high"), "Succeeded").get("status") == "True", 300)  # fmt: skip
        back = until("low up again", on_worker, lambda: condition(
            api.get(path), "Ready").get("status") == "True" and api.get(path), 300)  # fmt: skip
        assert condition(back, "Failed").get("status") != "True", back["status"]
        again = until("low admitted again", on_worker, lambda: next(
            (w for w in workloads_of(api, namespace, "low")
             if condition(w, "Admitted").get("status") == "True"), None), 60)  # fmt: skip
        assert workload["metadata"]["uid"] == again["metadata"]["uid"]  # the same, queued again


def test_fluxhop_run_on_the_manager_follows_it_to_its_exit_code(
    manager: Manager, admin: Api, namespace: str, both: tuple[Operator, Operator]
):
    """``fluxhop run --target minicluster --queue lq`` against the manager:
    the queue dispatches, so the resource is made MultiKueue's; fluxhop says
    which worker took it, prints rank 0's output that came back in its
    status (argv intact), exits with the job's code, and deletes it."""
    _, on_worker = both
    done = run_on(manager, namespace, "ran")
    assert done.returncode == 3, (done.stderr, on_worker.tail())
    assert "[a b][c]" in done.stdout.splitlines(), done.stdout
    assert f"fluxhop: dispatched by MultiKueue to worker cluster {WORKER}" in done.stderr
    assert f"failed on worker cluster {WORKER}: rank 0 exited with code 3" in done.stderr
    path = f"{MINICLUSTERS.format(namespace)}/ran"
    with manager.admin() as api:
        assert api.find(path) is None  # deleted once it ended, here and there
    eventually("the worker's copy gone", lambda: admin.find(path) is None, 120)


@pytest.mark.parametrize(
    ("target", "queue", "said"),
    [
        ("minicluster", "nope", "queue 'nope' (label kueue.x-k8s.io/queue-name): there is no "
                                "LocalQueue nope in namespace"),
        ("job", "lq", "queue 'lq' (label kueue.x-k8s.io/queue-name) dispatches to other "
                      "clusters"),
    ],
)  # fmt: skip
def test_bad_input_on_the_manager_is_one_line_and_nothing_is_made(
    manager: Manager, namespace: str, both: tuple[Operator, Operator], target: str, queue: str,
    said: str,
):  # fmt: skip
    done = fluxhop(manager.cluster, "run", "--target", target, "--namespace", namespace,
                   "--queue", queue, "--image", "host", "--name", "bad", "--", "true")  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.startswith(f"fluxhop: {said}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    with manager.admin() as api:
        for kinds in (MINICLUSTERS.format(namespace), f"/apis/batch/v1/namespaces/{namespace}/jobs",
                      f"/api/v1/namespaces/{namespace}/configmaps"):  # fmt: skip
            names = [o["metadata"]["name"] for o in api.get(kinds)["items"]]
            assert "bad" not in names and not [n for n in names if n.startswith("bad-")], names


def test_with_the_first_worker_full_the_second_one_gets_it(
    manager: Manager, cluster: LocalCluster, admin: Api, namespace: str,
    both: tuple[Operator, Operator], tmp_path: Path,
):  # fmt: skip
    """The first worker's quota taken by a MiniCluster made there: one
    created on the manager waits, fluxhop run saying why; then a second
    worker with nodes of its own (a guest cluster on this machine's pod
    network, its own Kueue and fluxhop operator) gets it, and it runs there
    with real Flux."""
    _, on_worker = both
    # the first worker full: an interactive MiniCluster of its own has its quota
    admin.create(
        MINICLUSTERS.format(namespace), dispatched(manager, "filler", None, managed_by=None)
    )
    until("the first worker full", on_worker, lambda: condition(admin.get(
        f"{MINICLUSTERS.format(namespace)}/filler"), "Ready").get("status") == "True", 300)  # fmt: skip
    waited = run_on(manager, namespace, "waits", "--timeout", "20")
    assert waited.returncode != 0
    # the manager's quota is there; MultiKueue's check waits for a worker with room
    assert ("timed out after 20s waiting for MiniCluster waits: waiting for admission by queue "
            "lq: quota reserved, waiting for admission checks (fluxhop-multikueue Pending)"
            ) in waited.stderr, waited.stderr  # fmt: skip
    with second_worker_of(manager, cluster) as second, second.cluster.admin() as there, \
            ExitStack() as stack:  # fmt: skip
        assert bool(second.cluster.real_nodes) == bool(cluster.real_nodes)  # like the first
        there.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        stack.enter_context(local_queue(there, namespace, "lq", {"cpu": "2"}))
        on_second = Operator(second.cluster, second.operator_kubeconfig, namespace,
                             tmp_path / "second.log")  # fmt: skip
        stack.callback(on_second.stop)
        done = run_on(manager, namespace, "spill")
        assert done.returncode == 3, (done.stderr, on_second.tail())
        assert "[a b][c]" in done.stdout.splitlines(), done.stdout
        assert f"fluxhop: dispatched by MultiKueue to worker cluster {WORKER2}" in done.stderr
        assert f"worker cluster {WORKER}\n" not in done.stderr, done.stderr
