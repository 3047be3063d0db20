"""Autoscaling by fluxhop's operator on the real cluster with real Flux
(issue #24): the operator runs here as a process with deploy/'s
ServiceAccount (its ClusterRole enforced by the real API server), reads rank
0's metrics over the pod network and drains through the API's exec. Nothing
steps it: the test waits for what it does on its own timer.

A MiniCluster resource of size 1 and maxSize 4 grows to 4 for a job that
needs 4 nodes, which runs and completes; idle past the delay it is drained
and shrunk back to 1, the drained ranks leaving cleanly; a job running on
rank 3 when the delay has passed keeps running until it ends, and then the
shrink happens. Decisions are events and status.autoscale. Under Fluxion
and under sched-simple (the job waits for the growth under both)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fluxhop.cluster.api import Kube
from fluxhop.cluster.podexec import pod_exec
from fluxhop.workload.status import running_lead
from tests.documents import minicluster_doc
from tests.realflux.schedulers import Scheduler
from tests.realk8s.api import Api, ApiError
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import placed_minicluster
from tests.realk8s.test_operator import MINICLUSTERS, Operator, condition, deployed  # noqa: F401
from tests.realk8s.tools import InNamespace, eventually, scratch_namespace

pytestmark = pytest.mark.usefixtures("needs_flux")
NAME, DELAY = "grow", 10  # long enough for the test's own commands between jobs


class Scaled(InNamespace):
    operator: Operator
    scheduler: Scheduler

    def flux(self, *args: str) -> str:
        return self.checked("proxy", NAME, "flux", *args)

    def state(self, jobid: str) -> str:
        return self.flux("jobs", "-no", "{state}", jobid).strip()

    def resource(self) -> dict[str, Any]:
        return self.admin.get(f"{MINICLUSTERS.format(self.namespace)}/{NAME}")

    def decision(self) -> dict[str, Any]:
        return (self.resource().get("status") or {}).get("autoscale") or {}

    def pods(self) -> list[dict[str, Any]]:
        return self.admin.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]

    def events(self) -> list[str]:
        found = self.admin.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        # in the order written: a list is by name (random), times are to the second;
        # etcd's resourceVersions grow with each write (opaque to clients, not to this test)
        found.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
        return [e["reason"] for e in found if e["involvedObject"].get("kind") == "MiniCluster"]

    def until(self, what: str, check: Any, timeout: float = 240) -> Any:
        try:
            return eventually(what, check, timeout)
        except AssertionError as error:
            raise AssertionError(f"{error}\noperator log:\n{self.operator.tail()}") from None


@pytest.fixture(scope="module")
def scaled(
    cluster: LocalCluster,
    deployed: Path,  # noqa: F811
    tmp_path_factory,
    scheduler: Scheduler,
) -> Iterator[Scaled]:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with scratch_namespace(cluster) as (admin, namespace):
        running = Operator(cluster, deployed, namespace, log, "--autoscale-interval", "0.5",
                           POD_NAMESPACE="fluxhop-system")  # fmt: skip
        scaled = Scaled(cluster, admin, namespace)
        scaled.operator = running
        scaled.scheduler = scheduler
        try:
            yield scaled
        finally:
            # what the last test left (it stops the operator and deletes it)
            resource = f"{MINICLUSTERS.format(namespace)}/{NAME}"
            try:
                if gone_yet(admin, resource):
                    admin.delete(resource)
                    scaled.until("the MiniCluster gone", lambda: not gone_yet(admin, resource), 120)
            finally:
                running.stop()


def gone_yet(admin: Api, path: str) -> bool:
    """Whether ``path`` still exists (False once the API server says 404)."""
    try:
        admin.get(path)
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


def test_it_grows_for_a_job_that_needs_four_nodes(scaled: Scaled):
    doc = minicluster_doc(NAME, size=1, maxSize=4, interactive=True,
                          autoscale={"scaleDownDelaySeconds": DELAY},
                          flux=scaled.scheduler.flux(container={"disable": True}),
                          containers=[{"image": "host"}])  # fmt: skip
    doc = placed_minicluster(scaled.cluster, doc)
    scaled.admin.create(MINICLUSTERS.format(scaled.namespace), doc)
    scaled.until("Ready", lambda: condition(scaled.resource(), "Ready").get("status") == "True")
    scaled.until("rank 0 online", lambda: scaled.online(NAME) == 1)
    assert scaled.scheduler.loaded(scaled.flux("module", "list"))
    # it looks on its own timer once rank 0's metrics answer: wait for the first look
    scaled.until("looking, at minSize", lambda: scaled.decision().get("desiredSize") == 1)
    jobid = scaled.checked("submit", NAME, "-N", "4", "--", "hostname").strip()
    scaled.until("the job ran", lambda: scaled.state(jobid) == "INACTIVE")
    assert scaled.flux("jobs", "-no", "{result} {nnodes}", jobid).split() == ["COMPLETED", "4"]
    assert "ScaledUp" in scaled.events()
    policy = scaled.admin.get(
        f"/apis/networking.k8s.io/v1/namespaces/{scaled.namespace}/networkpolicies"
    )["items"][0]
    assert "fluxhop-system" in json.dumps(policy)  # the operator's namespace may scrape


def test_idle_past_the_delay_it_is_drained_and_shrunk(scaled: Scaled):
    scaled.until("shrunk to 1", lambda: scaled.resource()["spec"]["size"] == 1)
    scaled.until("the drained ranks' pods gone", lambda: len(scaled.pods()) == 1, timeout=120)
    scaled.until("one broker online", lambda: scaled.online(NAME) == 1)
    lost = scaled.flux("overlay", "status", "--no-pretty", "--color=never")
    assert "lost" not in lost, lost  # they left cleanly: offline, not lost
    said = scaled.events()
    assert said.index("Draining") < said.index("ScaledDown"), said
    # the next look (a job event, or its wait at rank 0 running out) says so
    settled = {"desiredSize": 1, "reason": "at minSize 1"}
    scaled.until("the next look at minSize", lambda: scaled.decision() == settled, timeout=60)


def test_a_job_on_rank_three_finishes_before_the_shrink(scaled: Scaled):
    first = scaled.checked("submit", NAME, "-N", "4", "--", "true").strip()
    scaled.until("grown and run", lambda: scaled.state(first) == "INACTIVE")
    mark = "/tmp/fluxhop-operator-autoscale-go"  # rank 3's own /tmp: the job waits for the test
    job = scaled.checked("submit", NAME, "-N", "1", "--flux-args", "--requires=rank:3", "--",
                         "sh", "-c", f"until [ -e {mark} ]; do sleep 0.2; done").strip()  # fmt: skip
    scaled.until("the job running on rank 3", lambda: scaled.state(job) == "RUN")
    waiting = "waiting for the job(s) on ranks 3"
    scaled.until("drained, waiting for it", lambda: waiting in scaled.decision().get("reason", ""))
    assert scaled.state(job) == "RUN" and len(scaled.pods()) == 4  # nothing was killed
    assert scaled.resource()["spec"]["size"] == 4
    scaled.flux("exec", "-r", "3", "touch", mark)
    scaled.until("its job ended by itself", lambda: scaled.state(job) == "INACTIVE")
    assert scaled.flux("jobs", "-no", "{result}", job).strip() == "COMPLETED"
    scaled.until("then shrunk to 1", lambda: scaled.resource()["spec"]["size"] == 1)
    scaled.until("back to one pod", lambda: len(scaled.pods()) == 1, timeout=120)


def test_exec_through_the_api_server_is_word_for_word(scaled: Scaled):
    """What the operator drains with: the pods/exec subresource over a
    WebSocket, through the real API server to the kubelet."""
    kube = Kube.connect(str(scaled.cluster.admin_kubeconfig), namespace=scaled.namespace)
    try:
        pod = running_lead(scaled.pods())
        assert pod is not None
        script = 'printf "%s|" "$@"; echo oops >&2; exit 3'
        argv = ["sh", "-c", script, "x", "a  b", "it's", "", "ƒ"]
        done = pod_exec(kube, pod["metadata"]["name"], NAME, argv, timeout=30)
        assert (done.returncode, done.stdout, done.stderr) == (3, "a  b|it's||ƒ|", "oops\n")
        assert pod_exec(kube, pod["metadata"]["name"], NAME, ["true"], timeout=30).returncode == 0
        missing = pod_exec(kube, pod["metadata"]["name"], NAME, ["no-such-command"], timeout=30)
        assert missing.returncode != 0 and missing.stderr.strip()
    finally:
        kube.close()


def test_with_its_operator_stopped_it_is_deleted_all_the_same(scaled: Scaled):
    """The autoscale and health timers put no finalizer on the MiniClusters
    they look at (kopf's timers asked for one, which only a running
    operator removes: a stopped or uninstalled operator left them
    undeletable, #35's note). Stopped, the operator holds up no delete, and
    the garbage collector takes the children as for any owner. Last: it
    stops the module's operator."""
    resource = f"{MINICLUSTERS.format(scaled.namespace)}/{NAME}"
    assert scaled.resource()["metadata"].get("finalizers") in (None, []), scaled.resource()
    scaled.operator.stop()
    scaled.admin.delete(resource)
    eventually("the MiniCluster gone, its operator stopped",
               lambda: not gone_yet(scaled.admin, resource), 60)  # fmt: skip
    jobs = f"/apis/batch/v1/namespaces/{scaled.namespace}/jobs"
    eventually("its Job collected", lambda: not scaled.admin.get(jobs)["items"], 120)
