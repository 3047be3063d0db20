"""Rabbit Workflows at a machine's scale: fluxhop's hooks against DWS's real
Workflow controller and webhook (issue #36; plain script; prints a table).

    sudo .venv/bin/python bench/bench_rabbit_workflows.py [--counts 10,100,1000]

Needs root and the builds (python -m tests.build: the test cluster and the
DWS peer). For each COUNT, in a fresh namespace, COUNT Workflows (a GFS2
`#DW jobdw` and a `#DW container` on a profile with `createContainer:
false`) are created and taken together through Proposal -> ... -> Teardown,
as flux-coral2's DWS service takes its jobs' Workflows: every `desiredState`
asked for, NNF's side played (tests/realk8s/nnf.py) until every one is
ready, then fluxhop's hook for that state called on each Workflow in turn:
`on_setup` at Setup, `on_pre_run` at PreRun (the MiniCluster is created and
waited for: two pods on the two rabbits), `on_post_run` before PostRun is
asked for, `on_teardown` at Teardown. The rabbits are kwok's nodes: their
pods read Running while nothing runs (tests/realk8s/kwok.py): what
is measured is the requests and the hooks, not Flux (tests/realk8s/
test_rabbit_dws.py boots it).

fluxhop runs as the workload manager would run it: one Client, with a
ServiceAccount token of its own, bound to Kubernetes' `edit` role and a role
for what the rabbit guide says the hooks read. Its requests are counted by
the API server (the audit log of that ServiceAccount), never by fluxhop.

Per COUNT and transition: fluxhop's API requests per Workflow (and by verb),
the hook's p50 and p99, and the seconds per Workflow DWS and NNF's side took
to make the state ready (the wave's time over COUNT). Last lines: the
largest spread of requests per Workflow per transition over the counts
(`requests per Workflow per transition, largest/smallest over counts: R`;
1.00 is constant), and whether any hook's p50 passed DWS's time. PreRun
waits for its pods (Kubernetes' Job controller, scheduler and kubelet), so
its own part, up to the MiniCluster made, is shown and judged apart.

What PreRun waits for is set by the cluster: the Job controller's requests
(2 pods, 2 Job status updates, 2 events for a MiniCluster of two) go through
the controller manager's client, at Kubernetes' default of 20 requests a
second once its burst (30) is spent, so a steady stream of PreRuns costs 300
ms each there, whatever fluxhop does. ``--api-qps N`` starts the controller
manager and the scheduler with ``--kube-api-qps=N --kube-api-burst=2N``, as a
site running Workflows at this rate would.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realk8s import audit
from tests.realk8s.api import Api
from tests.realk8s.binaries import bin_dir, missing_binaries
from tests.realk8s.cluster import LocalCluster, NodeSpec
from tests.realk8s.dws import DWS_API, NNF_API, Dws, missing_dws
from tests.realk8s.nnf import PROFILE, PROFILES, Nnf, container_profile

import fluxhop
from fluxhop.rabbit.hooks import on_post_run, on_pre_run, on_setup, on_teardown
from fluxhop.rabbit.policy import Owner, Policy

RABBITS = ("node-a", "node-b")
COMPUTES = {"compute-1": "node-a", "compute-2": "node-a", "compute-3": "node-b"}
DIRECTIVES = [
    "#DW jobdw type=gfs2 capacity=10GiB name=scratch",
    f"#DW container name=mpi profile={PROFILE} DW_JOB_scratch=scratch",
]
JOBSPEC = {"attributes": {"system": {"rabbit": {"mpi": {
    "command": "sleep infinity", "nodes": len(RABBITS), "add_flux": False}}}}}  # fmt: skip
OWNER = Owner(uid=0, gid=0, user="root", groups=())
POLICY = Policy.from_config({"users": ["root"]})
WLM = "flux-wlm"  # the workload manager's namespace and ServiceAccount: fluxhop's identity
STATES = ("Proposal", "Setup", "DataIn", "PreRun", "PostRun", "DataOut", "Teardown")
HOOKED = ("Setup", "PreRun", "PostRun", "Teardown")  # PostRun's runs before it is asked for
WORKFLOWS = DWS_API + "/namespaces/{}/workflows"


def identity(cluster: LocalCluster) -> Path:
    """A kubeconfig for fluxhop: its ServiceAccount, `edit` everywhere, and
    the reads the rabbit guide names."""
    reads = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": WLM},
        "rules": [
            {"apiGroups": [NNF_API.split("/")[2]],
             "resources": ["nnfcontainerprofiles", "nnfcontainerdata", "nnfaccesses"],
             "verbs": ["get"]},
            {"apiGroups": [DWS_API.split("/")[2]], "resources": ["clientmounts"],
             "verbs": ["list"]},
        ],
    }  # fmt: skip

    def binding(role: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{WLM}-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": WLM, "namespace": WLM}],
        }  # fmt: skip

    with cluster.admin() as api:
        api.create("/api/v1/namespaces", {"metadata": {"name": WLM}})
        api.create(f"/api/v1/namespaces/{WLM}/serviceaccounts", {"metadata": {"name": WLM}})
        api.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", reads)
        for role in ("edit", WLM):
            api.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding(role))
        api.apply(f"/api/v1/namespaces/{PROFILES}",
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROFILES}},
                  "bench")  # fmt: skip
        api.apply(f"{NNF_API}/namespaces/{PROFILES}/nnfcontainerprofiles/{PROFILE}",
                  container_profile(), "bench")  # fmt: skip
    return cluster.kubeconfig(WLM, token=cluster.token(WLM, WLM, seconds=24 * 3600))


class Counted(logging.Handler):
    """fluxhop's warnings, counted (a thousand alike would drown the table),
    and when each PreRun had made its MiniCluster (its log line), before it
    waits for the pods."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: Counter[str] = Counter()
        self.created: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.messages[str(record.msg)] += 1  # the format: alike ones counted together
        elif str(record.msg).startswith("created rabbit MiniCluster"):
            self.created.append(time.perf_counter())


COUNTED = Counted()


def drive(api: Api, nnf: Nnf, namespace: str, names: list[str], state: str) -> float:
    """Ask every Workflow for ``state``; play NNF until every one is ready.
    Returns the seconds it took."""
    start = time.perf_counter()
    for name in names:
        api.patch(f"{WORKFLOWS.format(namespace)}/{name}", {"spec": {"desiredState": state}},
                  "merge")  # fmt: skip
    pending = set(names)
    while pending:
        for flow in api.get(WORKFLOWS.format(namespace))["items"]:
            name, status = flow["metadata"]["name"], flow.get("status") or {}
            if name not in pending:
                continue
            if status.get("state") == state and status.get("ready"):
                pending.discard(name)
            elif status.get("status") == "Error":
                raise SystemExit(f"bench_rabbit_workflows: {name} at {state}: {status}")
            else:
                nnf.serve(namespace, name)
    return time.perf_counter() - start


def name_computes(api: Api, namespace: str, names: list[str]) -> None:
    """The job's compute nodes in each Workflow's Computes (after Proposal)."""
    data = [{"name": compute} for compute in sorted(COMPUTES)]
    for name in names:
        api.patch(f"{DWS_API}/namespaces/{namespace}/computes/{name}", {"data": data}, "merge")


def hooks(client: fluxhop.Client, saved: list[str]) -> dict[str, Callable[[dict[str, Any]], Any]]:
    return {
        "Setup": lambda flow: on_setup(JOBSPEC, flow, RABBITS, OWNER, policy=POLICY,
                                       cxi_resource=None),
        "PreRun": lambda flow: on_pre_run(JOBSPEC, flow, RABBITS, OWNER, client, policy=POLICY,
                                          cxi_resource=None, mount_root=str(ROOT)),
        "PostRun": lambda flow: on_post_run(flow, client, saved.append),
        "Teardown": lambda flow: on_teardown(flow, client, saved.append),
    }  # fmt: skip


ROOT = Path(tempfile.gettempdir()) / "fluxhop-bench-nnf"  # NNF's mount root, played


def measure(cluster: LocalCluster, kubeconfig: Path, count: int) -> dict[str, dict[str, Any]]:
    namespace = f"rabbits-{count}-{uuid.uuid4().hex[:4]}"
    names = [f"fluxjob-{i:04d}" for i in range(count)]
    results: dict[str, dict[str, Any]] = {}
    saved: list[str] = []
    with cluster.admin() as api:
        api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        nnf = Nnf(api, ROOT / namespace, COMPUTES)
        client = fluxhop.Client(namespace=namespace, kubeconfig=kubeconfig)
        calls = hooks(client, saved)
        try:
            for i, name in enumerate(names):
                api.create(WORKFLOWS.format(namespace), {
                    "apiVersion": DWS_API.removeprefix("/apis/"), "kind": "Workflow",
                    "metadata": {"name": name},
                    "spec": {"desiredState": "Proposal", "wlmID": "flux", "jobID": i + 1,
                             "userID": OWNER.uid, "groupID": OWNER.gid,
                             "dwDirectives": DIRECTIVES}})  # fmt: skip
            for state in STATES:
                row: dict[str, Any] = {"times": [], "made": []}
                if state == "PostRun":  # the job has ended: before PostRun is asked for
                    row["window"] = run_hooks(
                        api, namespace, names, calls[state], row["times"], row["made"]
                    )
                row["dws"] = drive(api, nnf, namespace, names, state) / count
                if state == "Proposal":
                    name_computes(api, namespace, names)
                if state in HOOKED and state != "PostRun":
                    row["window"] = run_hooks(
                        api, namespace, names, calls[state], row["times"], row["made"]
                    )
                results[state] = row
                print(f"  {count}: {state} done", flush=True)
        finally:
            client.close()
            api.delete(WORKFLOWS.format(namespace))
            api.delete(f"/api/v1/namespaces/{namespace}")
    found = audit.requests(cluster.audit_log, f"system:serviceaccount:{WLM}:{WLM}")
    for row in results.values():
        if "window" in row:
            row["verbs"] = audit.count(found, *row["window"])
    return results


def run_hooks(api: Api, namespace: str, names: list[str], hook: Callable[[dict[str, Any]], Any],
              times: list[float], made_in: list[float]) -> tuple[float, float]:  # fmt: skip
    """The hook on every Workflow as it now is (listed first: the workload
    manager holds them); each call timed. Returns the window's epoch times."""
    flows = {f["metadata"]["name"]: f for f in api.get(WORKFLOWS.format(namespace))["items"]}
    start = time.time()
    for name in names:
        made = len(COUNTED.created)
        began = time.perf_counter()
        hook(flows[name])
        times.append(time.perf_counter() - began)
        if len(COUNTED.created) > made:  # PreRun: its own part, up to the MiniCluster made
            made_in.append(COUNTED.created[-1] - began)
    return start, time.time()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def table(results: dict[int, dict[str, dict[str, Any]]]) -> None:
    counts = sorted(results)
    print("\nfluxhop's API requests per Workflow (the API server's count) | hook p50, p99 ms | "
          "DWS+NNF ms per Workflow")  # fmt: skip
    spread, slowest = 1.0, []
    mine: list[tuple[str, float, float]] = []  # PreRun's own part: (where, p50, DWS's time)
    for state in STATES:
        per = []
        for count in counts:
            row = results[count][state]
            verbs = row.get("verbs", Counter())
            requests = sum(verbs.values()) / count
            per.append(requests)
            hooked = row["times"]
            p50, p99 = (
                (percentile(hooked, 0.5) * 1000, percentile(hooked, 0.99) * 1000)
                if hooked
                else (0.0, 0.0)
            )
            if hooked and p50 > row["dws"] * 1000:
                slowest.append(f"{state} at {count}")
            detail = ", ".join(f"{k} {n / count:g}" for k, n in sorted(verbs.items())) or "-"
            print(f"{state:<9} {count:>5}: {requests:6.2f} | {p50:8.1f} {p99:8.1f} | "
                  f"{row['dws'] * 1000:8.1f}   ({detail})")  # fmt: skip
            if row["made"]:
                own = percentile(row["made"], 0.5) * 1000, percentile(row["made"], 0.99) * 1000
                mine.append((f"{state} at {count}", own[0], row["dws"] * 1000))
                print(f"{'':<9} {'':>5}  its own part, to the MiniCluster made: "
                      f"p50 {own[0]:.1f}, p99 {own[1]:.1f} ms; the rest waits for its pods")  # fmt: skip
        if max(per) > 0:
            spread = max(spread, max(per) / min(per) if min(per) else float("inf"))
    print(f"requests per Workflow per transition, largest/smallest over counts: {spread:.2f}")
    print("a hook's p50 past DWS's time per Workflow: " + (", ".join(slowest) or "never"))
    past = [where for where, p50, dws in mine if p50 > dws]
    print("PreRun's own part's p50 past DWS's time per Workflow: " + (", ".join(past) or "never"))


def positive(text: str) -> int:
    value = int(text)
    if value < 1:  # 0 would be client-go's own default (5), not "unlimited"
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="10,100,1000")
    parser.add_argument("--api-qps", type=positive, default=None,
                        help="the controller manager's and the scheduler's client rate "
                             "(default: Kubernetes' own, 20 and 50 requests a second)")  # fmt: skip
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    reason = missing_binaries() or missing_dws()
    reason = reason or (None if os.geteuid() == 0 else "needs root")
    if reason:
        raise SystemExit(f"bench_rabbit_workflows: {reason}")
    room = str(2 * max(counts) + 100)
    nodes = [NodeSpec(rabbit, labels={"cray.nnf.node": "true"},
                      capacity={"cpu": room, "memory": f"{room}Gi", "pods": room}, kwok=True)
             for rabbit in RABBITS]  # fmt: skip
    logging.getLogger("fluxhop").addHandler(COUNTED)
    logging.getLogger("fluxhop").setLevel(logging.INFO)
    logging.getLogger("fluxhop").propagate = False
    cluster = LocalCluster(bin_dir() or Path(), nodes, audited=(f"system:serviceaccounts:{WLM}",),
                           api_qps=args.api_qps).start()  # fmt: skip
    rate = "Kubernetes' defaults" if args.api_qps is None else f"{args.api_qps} requests/s"
    print(f"control plane's client rate: {rate}")
    dws = None
    try:
        dws = Dws(cluster).start()
        kubeconfig = identity(cluster)
        results = {}
        for count in counts:
            print(f"{count} Workflows:", flush=True)
            results[count] = measure(cluster, kubeconfig, count)
        table(results)
        print("fluxhop's warnings: " + (", ".join(f"{m} x{n}" for m, n in COUNTED.messages.items())
                                        or "none"))  # fmt: skip
    finally:
        if dws is not None:
            dws.stop()
        cluster.stop()
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
