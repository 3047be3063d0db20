"""The workload manager's side of a Workflow, played for the tests (issue
#36): what flux-coral2's DWS service does for a job. It creates the
Workflow (``wlmID: flux``, the job's ID, its owner's uid and gid, its
``#DW`` directives), names the job's compute nodes in the Workflow's
Computes once Proposal is ready, and moves ``desiredState`` one state at a
time, only once ``status.ready`` (DWS's webhook refuses anything else),
calling the test's hook for a state once it is ready. NNF's side is played
by tests/realk8s/nnf.py, served while it waits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.dws import DWS_API, NNF_API
from tests.realk8s.nnf import PROFILE, PROFILES, Nnf, container_profile
from tests.realk8s.tools import eventually, scratch_namespace

__all__ = ["STATES", "Hook", "Wlm", "rabbit_machine"]

STATES = ("Proposal", "Setup", "DataIn", "PreRun", "PostRun", "DataOut", "Teardown")
Hook = Callable[[dict[str, Any]], None]


@dataclass
class Wlm:
    admin: Api
    namespace: str
    nnf: Nnf
    job_ids: list[int] = field(default_factory=list)

    def path(self, name: str) -> str:
        return f"{DWS_API}/namespaces/{self.namespace}/workflows/{name}"

    def create(self, name: str, directives: list[str], *, uid: int, gid: int) -> dict[str, Any]:
        """The Workflow for a new job, as the API server (and DWS's
        mutating webhook, which registers the drivers) made it."""
        self.job_ids.append(len(self.job_ids) + 1)
        body = {
            "apiVersion": DWS_API.removeprefix("/apis/"),
            "kind": "Workflow",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"desiredState": "Proposal", "wlmID": "flux", "jobID": self.job_ids[-1],
                     "userID": uid, "groupID": gid, "dwDirectives": directives},
        }  # fmt: skip
        return dict(self.admin.create(f"{DWS_API}/namespaces/{self.namespace}/workflows", body))

    def _ready(self, name: str, state: str) -> dict[str, Any] | None:
        self.nnf.serve(self.namespace, name)
        flow = self.admin.get(self.path(name))
        status = flow.get("status") or {}
        return dict(flow) if status.get("state") == state and status.get("ready") else None

    def reach(self, name: str, state: str, timeout: float = 120) -> dict[str, Any]:
        """Ask for ``state`` and wait until DWS says it is ready."""
        # a merge patch: no resourceVersion to lose to the controller's writes
        self.admin.patch(self.path(name), {"spec": {"desiredState": state}}, "merge")
        ready: dict[str, Any] = eventually(f"Workflow {name}: {state} ready",
                                           lambda: self._ready(name, state), timeout)  # fmt: skip
        if state == "Proposal":
            self._computes(name)
        return ready

    def _computes(self, name: str) -> None:
        path = f"{DWS_API}/namespaces/{self.namespace}/computes/{name}"
        eventually(f"Computes {name}", lambda: self.admin.find(path))
        data = [{"name": compute} for compute in sorted(self.nnf.computes)]
        self.admin.patch(path, {"data": data}, "merge")

    def run(self, name: str, hooks: dict[str, Hook] | None = None, *, until: str = "Teardown",
            before: dict[str, Hook] | None = None) -> dict[str, Any]:  # fmt: skip
        """Every state from Proposal to ``until``, each hook called once its
        state is ready (with the Workflow as it then is), each ``before``
        hook before its state is asked for (flux-coral2 ends a job's work
        before it asks for PostRun)."""
        flow: dict[str, Any] = {}
        for state in STATES[: STATES.index(until) + 1]:
            if before and state in before:
                before[state](self.admin.get(self.path(name)))
            flow = self.reach(name, state)
            if hooks and state in hooks:
                hooks[state](flow)
        return flow

    def finish(self, name: str) -> None:
        """Teardown, then the Workflow deleted (DWS's finalizer: its
        controller must still run) and gone."""
        self.reach(name, "Teardown")
        self.admin.delete(self.path(name))
        eventually(f"Workflow {name} gone", lambda: self.admin.find(self.path(name)) is None)


@contextmanager
def rabbit_machine(cluster: LocalCluster, prefix: Path, computes: dict[str, str]) -> Iterator[Wlm]:
    """A workload manager in a namespace of its own, NNF played beside it
    (file systems under ``prefix``; ``computes``: compute -> its rabbit),
    the tests' container profile in NNF's profile namespace; the namespaces
    NNF's side made (the computes') deleted after."""
    with scratch_namespace(cluster) as (admin, namespace):
        admin.apply(f"/api/v1/namespaces/{PROFILES}",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROFILES}}, "test")  # fmt: skip
        admin.apply(f"{NNF_API}/namespaces/{PROFILES}/nnfcontainerprofiles/{PROFILE}",
                    container_profile(), "test")  # fmt: skip
        try:
            yield Wlm(admin, namespace, Nnf(admin, prefix, computes))
        finally:
            doomed = [f"/api/v1/namespaces/{name}" for name in (PROFILES, *computes)]
            for path in doomed:
                if admin.find(path) is not None:
                    admin.delete(path)
            # gone, not going: the next module makes them again
            eventually("NNF's namespaces gone",
                       lambda: all(admin.find(path) is None for path in doomed), 120)  # fmt: skip
