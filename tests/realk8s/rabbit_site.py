"""The rabbit site the DWS modules play on (tests/realk8s/test_rabbit_dws.py,
test_rabbit_hostile.py): the real nodes labelled and tainted as NNF's
rabbits, three computes served by them, the job's owner and directives, a
workload manager with NNF's side beside it (``machine``), and what a test
looks at of the MiniCluster PreRun made. The fixtures reach the modules
through conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fluxhop.rabbit.policy import Owner
from tests.realk8s.api import Api
from tests.realk8s.cleanup import RUN_DIR
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.dws import Dws
from tests.realk8s.nnf import PROFILE
from tests.realk8s.placing import REAL, REAL_NODES
from tests.realk8s.wlm import Wlm, rabbit_machine

RABBITS = tuple(node.name for node in REAL_NODES)  # the real nodes play rabbits
COMPUTES = {"compute-1": RABBITS[0], "compute-2": RABBITS[0], "compute-3": RABBITS[1]}
# NNF's label and taint on its rabbits: the MiniCluster's node selector and toleration
RABBIT_LABEL = "cray.nnf.node"
RABBIT_TAINT = {"key": RABBIT_LABEL, "value": "true", "effect": "NoSchedule"}
# which directory of the file system is each compute node's (NNF's layout)
DIRECTORIES = (f"compute-1={RABBITS[0]}-0 compute-2={RABBITS[0]}-1 "
               f"compute-3={RABBITS[1]}-0")  # fmt: skip
OWNER = Owner(uid=0, gid=0, user="root", groups=())
SCRATCH = "#DW jobdw type=gfs2 capacity=10GiB name=scratch"
CONTAINER = f"#DW container name=mpi profile={PROFILE} DW_JOB_scratch=scratch"


def rabbit_job(command: str) -> dict[str, Any]:
    mpi = {"command": command, "nodes": len(RABBITS), "add_flux": False}
    return {"attributes": {"system": {"rabbit": {"mpi": mpi}}}}


@pytest.fixture(scope="module")
def rabbits(cluster: LocalCluster, real_nodes: list[str]) -> Iterator[None]:
    """The real nodes labelled and tainted as NNF labels and taints its
    rabbits (the MiniCluster's node selector and toleration), NNF's taint
    in place of the real nodes' own while the module runs: it keeps every
    other pod off them as that one does."""
    with cluster.admin() as admin:
        kept = {node: admin.get(f"/api/v1/nodes/{node}")["spec"].get("taints") or []
                for node in RABBITS}  # fmt: skip
        for node in RABBITS:
            admin.patch(f"/api/v1/nodes/{node}", {
                "metadata": {"labels": {RABBIT_LABEL: "true"}},
                "spec": {"taints": [*(t for t in kept[node] if t["key"] != REAL), RABBIT_TAINT]},
            }, "merge")  # fmt: skip
        try:
            yield
        finally:
            for node in RABBITS:
                admin.patch(f"/api/v1/nodes/{node}", {
                    "metadata": {"labels": {RABBIT_LABEL: None}},
                    "spec": {"taints": kept[node]},
                }, "merge")  # fmt: skip


@pytest.fixture(scope="module")
def machine(cluster: LocalCluster, dws: Dws, rabbits: None) -> Iterator[Wlm]:
    prefix = RUN_DIR / "nnf"  # where the pods see the host's files
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        with rabbit_machine(cluster, prefix, COMPUTES) as wlm:
            yield wlm
    finally:
        for path in sorted(prefix.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        prefix.rmdir()


def cordon(admin: Api, unschedulable: bool) -> None:
    """The rabbits cordoned (no new pod placed on them), or not."""
    for node in RABBITS:
        admin.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": unschedulable or None}},
                    "merge")  # fmt: skip


def made(admin: Api, ns: str, name: str) -> dict[str, str]:
    """Kind -> UID of each object the MiniCluster is made of, and its pods."""
    kinds = {"Job": f"/apis/batch/v1/namespaces/{ns}/jobs/{name}",
             "Secret": f"/api/v1/namespaces/{ns}/secrets/{name}-flux-curve",
             "Service": f"/api/v1/namespaces/{ns}/services/{name}"}  # fmt: skip
    found = {kind: admin.find(path) for kind, path in kinds.items()}
    uids = {kind: obj["metadata"]["uid"] for kind, obj in found.items() if obj is not None}
    pods = admin.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"job-name={name}")["items"]
    uids.update({p["metadata"]["name"]: p["metadata"]["uid"] for p in pods})
    return uids
