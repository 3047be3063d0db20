"""fluxhop chooses no MPI transport (docs/guides/mpi.md: Flux's PMI already
tells each MPI which ranks share a pod, UCX refuses shared memory between
pods, and a forced transport would cost the in-pod shared memory and the
fabric) - the one MPI variable it sets is Open MPI's CMA switch, off where it
chose the RuntimeDefault seccomp profile that blocks CMA - and passes the
user's own through untouched, on every target."""

from __future__ import annotations

import re

import pytest

from fluxhop.render import TARGETS, render
from fluxhop.render.security import CMA_OFF
from fluxhop.spec.flags import minicluster_from_flags
from fluxhop.spec.placement import Placement
from tests.documents import mappings

# UCX, Open MPI's MCA parameters, PMIx, MPICH's control variables, libfabric
TRANSPORT = re.compile(r"^(UCX_|OMPI_MCA_|PMIX_MCA_|MPIR_CVAR_|FI_)")


def environments(objects: list[dict]) -> list[dict[str, str]]:
    """The environment of every container of every pod template in ``objects``."""
    found = []
    for node in mappings(objects):
        for key in ("containers", "initContainers"):
            for container in node.get(key) or []:
                env = {e["name"]: e.get("value") for e in container.get("env") or []}
                found.append({**env, **(container.get("environment") or {})})  # the CR's
    return found


def mpi_spec(**env: str):
    return minicluster_from_flags(
        ["./mpi-app"], image="ghcr.io/example/mpi:1", nodes=4, tasks=8, name="mpi", env=env,
        placement=Placement(pods_per_node=1),
    )  # fmt: skip


@pytest.mark.parametrize("target", TARGETS)
def test_no_transport_variable_is_set(target):
    envs = environments(render(mpi_spec(), target))
    assert envs, "no container found"
    chosen = {name: value for env in envs for name, value in env.items() if TRANSPORT.match(name)}
    assert chosen.items() <= CMA_OFF.items()


@pytest.mark.parametrize("target", TARGETS)
def test_the_users_transport_variables_arrive_as_given(target):
    given = {"UCX_TLS": "tcp,self", "OMPI_MCA_btl": "self,tcp"}
    envs = environments(render(mpi_spec(**given), target))
    assert any(env.items() >= given.items() for env in envs), envs
