"""Shared inputs for the rabbit tests: rabbits, a DWS Workflow, jobspecs."""

from __future__ import annotations

import pytest

RABBITS = ("rabbit-p1", "rabbit-p2", "rabbit-p3", "rabbit-p4")
WORKFLOW_UID = "0b7c2a4e-9d1f-4c55-8a11-1f2e3d4c5b6a"


def workflow_object(*directives: str, name: str = "fluxjob-1234", namespace: str = "default"):
    """A Workflow as the API server returns it (only the fields fluxhop reads)."""
    return {
        "apiVersion": "dataworkflowservices.github.io/v1alpha7",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": namespace, "uid": WORKFLOW_UID},
        "spec": {"dwDirectives": list(directives), "jobID": 1234, "userID": 1001, "groupID": 2001},
    }


def rabbit_job(mpi):
    return {"attributes": {"system": {"dw": "xfs_small", "rabbit": {"mpi": mpi}}}}


@pytest.fixture
def workflow():
    return workflow_object(
        "#DW jobdw type=xfs capacity=10GiB name=local",
        "#DW jobdw type=gfs2 capacity=50GiB name=shared-scratch",
        "#DW copy_in source=/p/lustre/in destination=$DW_JOB_shared_scratch/",
        "#DW jobdw type=lustre capacity=1TiB name=big",
        "#DW persistentdw name=project-data",
    )
