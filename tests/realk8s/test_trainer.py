"""Kubeflow Trainer's flux plugin and ``fluxhop trainer`` side by side, on the
real Trainer controller (github.com/kubeflow/trainer/v2) and JobSet:

* for each upstream flux TrainJob example, the JobSet the Trainer builds and
  the one ``fluxhop trainer render`` builds differ only where the Trainer
  guide's table says, each difference an intended fix or a gap;
* both run with real Flux in real containers on the real nodes (the
  runtime's pod template places them there; the plugin's Flux view image
  and the example's LAMMPS image are built here, tests/realk8s/images);
* which of the plugin's known defects reproduce on its own JobSet.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
import zmq.utils.z85

from tests.conformance import CONFORMANCE, REPO
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.controllers import Running
from tests.realk8s.placing import ON_REAL_NODES, REAL_NODES
from tests.realk8s.tools import eventually, fluxhop
from tests.realk8s.trainer_diff import covered, differences, table_rows

EXAMPLES = CONFORMANCE / "trainer-examples"
RUNTIME = EXAMPLES / "examples__flux__flux-runtime.yaml"
TRAINJOBS = ["examples__flux__lammps-train-job.yaml", "examples__flux__flux-interactive.yaml"]
GUIDE = REPO / "docs" / "guides" / "trainer.md"
TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{}/jobsets"
QUIET = re.compile(r"^(<\d>|fluxhop: |flux-job: )")


@pytest.fixture
def runtime(cluster: LocalCluster, trainer: Running, admin: Api, tmp_path: Path) -> Path:
    """The upstream ClusterTrainingRuntime flux-distributed, installed; on
    the real nodes with their placement in its pod template (as a site puts
    its own there: TrainJobs change no placement); the file fluxhop reads."""
    document = yaml.safe_load(RUNTIME.read_text())
    for job in document["spec"]["template"]["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"].update(copy.deepcopy(ON_REAL_NODES))
    admin.apply(
        f"{TRAINER}/clustertrainingruntimes/{document['metadata']['name']}", document, "test"
    )
    placed = tmp_path / RUNTIME.name
    placed.write_text(yaml.safe_dump(document))
    return placed


def trainjob(name: str, namespace: str, **changes: Any) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text())
    document["metadata"]["namespace"] = namespace
    document["spec"].update(changes.pop("spec", {}))
    document["spec"]["trainer"].update(changes)
    return document


def theirs(admin: Api, namespace: str, document: dict[str, Any]) -> dict[str, Any]:
    """The JobSet the Trainer builds for ``document`` (created)."""
    admin.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", document)
    path = f"{JOBSETS.format(namespace)}/{document['metadata']['name']}"
    return eventually("the Trainer's JobSet", lambda: admin.find(path), 60)


def ours(
    cluster: LocalCluster, admin: Api, document: dict[str, Any], runtime: Path, tmp_path: Path
) -> dict[str, Any]:
    """fluxhop's JobSet for ``document``, read back from a server-side dry run
    in a namespace of its own (the Trainer's has the same name)."""
    source = tmp_path / f"{document['metadata']['name']}.yaml"
    source.write_text(yaml.safe_dump(document))
    done = fluxhop(
        cluster, "trainer", "render", "-f", str(source), "--runtime", str(runtime), "-o", "json"
    )
    assert done.returncode == 0, done.stderr
    rendered = json.loads(done.stdout)
    items = rendered["items"] if isinstance(rendered, dict) else rendered
    jobset = next(o for o in items if o["kind"] == "JobSet")
    side = f"{document['metadata']['namespace']}-side"
    if admin.find(f"/api/v1/namespaces/{side}") is None:
        admin.create("/api/v1/namespaces", {"metadata": {"name": side}})
    jobset["metadata"]["namespace"] = side
    back = admin.create(JOBSETS.format(side), jobset, dryRun="All")
    back["metadata"]["namespace"] = document["metadata"]["namespace"]
    return dict(back)


def test_the_jobsets_differ_only_as_the_guide_says(cluster: LocalCluster, admin: Api, namespace: str,
                                                   runtime: Path, tmp_path: Path):  # fmt: skip
    rows = table_rows(GUIDE)
    assert rows, f"{GUIDE} has no side-by-side table"
    unexplained, used = [], set()
    try:
        for name in TRAINJOBS:
            document = trainjob(name, namespace, spec={"suspend": True})  # built, not run
            for path, (their, our) in differences(theirs(admin, namespace, document),
                                                  ours(cluster, admin, document, runtime, tmp_path)).items():  # fmt: skip
                row = covered(path, list(rows))
                if row is None:
                    unexplained.append(f"{name}: {path}: Trainer {their!r}, fluxhop {our!r}")
                else:
                    used.add(row)
            admin.delete(
                f"{TRAINER}/namespaces/{namespace}/trainjobs/{document['metadata']['name']}"
            )
    finally:
        if admin.find(f"/api/v1/namespaces/{namespace}-side") is not None:
            admin.delete(f"/api/v1/namespaces/{namespace}-side")
    assert not unexplained, "differences missing from the guide's table:\n" + "\n".join(unexplained)
    assert set(rows) == used, f"rows of the guide's table that no example shows: {set(rows) - used}"


def test_both_run_with_real_flux(cluster: LocalCluster, admin: Api, namespace: str, runtime: Path,
                                 tmp_path: Path, needs_flux):  # fmt: skip
    """The lammps example with hostname for its command (no LAMMPS here), one
    process per node (the plugin's R claims numProcPerNode cores, which the
    machine's 2 CPUs would not have)."""
    document = trainjob("examples__flux__lammps-train-job.yaml", namespace, command=["hostname"],
                        numProcPerNode=1)  # fmt: skip
    admin.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", document)
    path = f"{JOBSETS.format(namespace)}/lammps-flux"

    def finished() -> str | None:
        jobset = admin.find(path) or {}
        done = {
            c["type"]
            for c in jobset.get("status", {}).get("conditions") or []
            if c["status"] == "True"
        }
        return next(iter(done & {"Completed", "Failed"}), None)

    assert eventually("the Trainer's JobSet finished", finished, 240) == "Completed"
    # the runtime's placement: real containers, the view image pulled
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert pods and {p["spec"]["nodeName"] for p in pods} <= {n.name for n in REAL_NODES}
    ran = tmp_path / "ours.yaml"
    ran.write_text(
        yaml.safe_dump({**document, "metadata": {**document["metadata"], "name": "lammps-ours"}})
    )
    done = fluxhop(
        cluster, "trainer", "run", "-f", str(ran), "--runtime", str(runtime), timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert sorted(line for line in done.stdout.splitlines() if not QUIET.match(line)) == [
        "lammps-ours-node-0-0", "lammps-ours-node-0-1"]  # fmt: skip


def test_which_of_the_plugins_defects_reproduce(cluster: LocalCluster, admin: Api, namespace: str,
                                                runtime: Path, tmp_path: Path, needs_flux):  # fmt: skip
    """Its exit code is lost (the TrainJob's JobSet completes although the
    command failed) and its CURVE key is derived from the TrainJob's UID (a
    value every reader of the object has); fluxhop's exits with the code."""
    document = trainjob("examples__flux__lammps-train-job.yaml", namespace, command=["sh", "-c", "exit 3"],
                        numProcPerNode=1)  # fmt: skip
    made = admin.create(f"{TRAINER}/namespaces/{namespace}/trainjobs", document)
    path = f"{JOBSETS.format(namespace)}/lammps-flux"
    eventually("the Trainer's JobSet finished", lambda: any(
        c["type"] in ("Completed", "Failed") and c["status"] == "True"
        for c in (admin.find(path) or {}).get("status", {}).get("conditions") or []), 240)  # fmt: skip
    conditions = {c["type"]: c["status"] for c in admin.get(path)["status"]["conditions"]}
    assert conditions.get("Completed") == "True"  # exit code 3, reported as success
    secret = admin.get(f"/api/v1/namespaces/{namespace}/secrets/lammps-flux-flux-curve")
    cert = __import__("base64").b64decode(secret["data"]["curve.cert"]).decode()
    seed = hashlib.sha256(made["metadata"]["uid"].encode()).digest()
    assert (
        f'secret-key = "{zmq.utils.z85.encode(seed).decode()}"' in cert
    )  # anyone with the UID has the key
    ran = tmp_path / "ours.yaml"
    ours_doc = copy.deepcopy(document)
    ours_doc["metadata"]["name"] = "exit-ours"
    ran.write_text(yaml.safe_dump(ours_doc))
    done = fluxhop(
        cluster, "trainer", "run", "-f", str(ran), "--runtime", str(runtime), timeout=300
    )
    assert done.returncode == 3, done.stderr
