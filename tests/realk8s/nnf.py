"""NNF's side of a Workflow, played for the tests (issue #36).

nnf-sos' controllers need the hardware, so this writes what they write for
the ``nnf`` driver entries DWS's webhook registered, state by state, and
then completes those entries as nnf-sos does (``completed: true``,
``status: Completed``, ``completeTime``; one Update of the whole Workflow,
which has no status subresource). Names and fields are nnf-sos' (v0.1.34:
nnf_workflow_controller*.go, nnf_access_controller.go): object *i* of
Workflow *wf* is ``<wf>-<i>``; a file system's rabbit-side NnfAccess is
``<wf>-<i>-servers`` with ``mountPath <prefix>/<workflow uid>-<i>``; GFS2 and
XFS are mounted there as one directory per compute a rabbit serves,
``<rabbit>-<k>``, and each compute's ClientMount (in the compute's
namespace) names its k in ``device.deviceReference.data``; with a container
profile that says ``createContainer: false``, NnfContainerData
``<wf>-<i>`` lists the volumes for an outside orchestrator.

A directory on the host stands in for each file system: ``prefix`` is what
NNF's ``SERVER_MOUNT_PREFIX`` is on a rabbit (``/mnt/nnf`` there), here a
directory of the test's own that the test cluster's pods can see.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fluxhop.rabbit.request import DEFAULT_IMAGE as RABBIT_IMAGE
from tests.realk8s.api import Api, ApiError
from tests.realk8s.dws import DWS_API, NNF_API

__all__ = [
    "DRIVER",
    "LUS_API",
    "PROFILE",
    "PROFILES",
    "Nnf",
    "arguments",
    "container_profile",
    "lustre_crd",
]

DRIVER = "nnf"
PROFILES = "nnf-system"  # NNF_CONTAINER_PROFILE_NAMESPACE in nnf-sos' manager
PROFILE = "fluxhop-mpi"  # the tests' container profile
STORAGE = ("jobdw", "persistentdw")  # what a container mounts
COMPUTE_PREFIX = "/mnt/nnf"  # COMPUTE_MOUNT_PREFIX: the computes' side (nothing here mounts it)
FIRST_PORT = 30000  # the first port the played port manager hands out


def arguments(directive: str) -> tuple[str, dict[str, str]]:
    """``#DW jobdw type=gfs2 name=x`` -> ("jobdw", {"type": "gfs2", "name": "x"})."""
    words = shlex.split(directive)
    return words[1], dict(word.split("=", 1) for word in words[2:] if "=" in word)


def container_profile(name: str = PROFILE, **data: Any) -> dict[str, Any]:
    """An NNF container profile for an outside orchestrator: NNF mounts the
    storage and starts no pods (``createContainer: false``)."""
    return {
        "apiVersion": NNF_API.removeprefix("/apis/"),
        "kind": "NnfContainerProfile",
        "metadata": {"name": name, "namespace": PROFILES},
        "data": {
            "createContainer": False,
            "storages": [
                {"name": "DW_JOB_scratch", "optional": False},
                {"name": "DW_PERSISTENT_project_data", "optional": True},
                {"name": "DW_GLOBAL_home", "optional": True},
            ],
            "spec": {"containers": [{"name": "mpi", "image": RABBIT_IMAGE}]},
            "numPorts": 2,
            **data,
        },
    }


LUS_API = "/apis/lus.cray.hpe.com/v1beta1"


def lustre_crd() -> dict[str, Any]:
    """LustreFileSystem's CRD, as NNF's Lustre operator (lustre-fs-operator,
    lus.cray.hpe.com/v1beta1) serves it: not in ../shared, so this stands in
    for it with its names and an open schema; the fields the tests write are
    the operator's (spec.name, mgsNids, mountRoot, namespaces.<ns>.modes)."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "lustrefilesystems.lus.cray.hpe.com"},
        "spec": {
            "group": "lus.cray.hpe.com",
            "scope": "Namespaced",
            "names": {"kind": "LustreFileSystem", "listKind": "LustreFileSystemList",
                      "plural": "lustrefilesystems", "singular": "lustrefilesystem"},
            "versions": [{"name": "v1beta1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                              "spec": open_object, "status": open_object}}}}],
        },
    }  # fmt: skip


def _ports(data: dict[str, Any], first: Callable[[int], int]) -> dict[str, str]:
    """What nnf-sos' addPortsEnvVars writes to the Workflow's status.env for a
    profile with ``numPorts``: every port the port manager gave the Workflow
    (numPorts per container of the profile), and each container's share.
    ``first(count)`` is where the Workflow's ``count`` ports start."""
    containers = [c["name"] for c in (data.get("spec") or {}).get("containers") or []]
    each = int(data.get("numPorts") or 0)
    count = each * len(containers)
    start = first(count) if count else 0
    ports = [str(start + i) for i in range(count)]
    if not ports:
        return {}
    env = {"NNF_CONTAINER_PORTS": ",".join(ports)}
    for k, name in enumerate(containers):
        env[f"NNF_CONTAINER_PORTS_{name.replace('-', '_')}"] = ",".join(
            ports[k * each : (k + 1) * each]
        )
    return env


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ensure(admin: Api, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Create, or leave as it is (nnf-sos' CreateOrUpdate, idempotent)."""
    try:
        return dict(admin.create(collection, obj))
    except ApiError as error:
        if error.status != 409:
            raise
        return dict(admin.get(f"{collection}/{obj['metadata']['name']}"))


@dataclass
class Nnf:
    """nnf-sos for the tests: ``computes`` maps each compute node to the
    rabbit that serves it; ``prefix`` stands in for SERVER_MOUNT_PREFIX."""

    admin: Api
    prefix: Path
    computes: dict[str, str]
    seen: list[str] = field(default_factory=list)  # "<state> <wf>" for every state served
    # the played port manager: each Workflow's first port (by UID), never two
    # Workflows the same ports, as NNF's NnfPortManager allocates them
    port_starts: dict[str, int] = field(default_factory=dict)
    next_port: int = FIRST_PORT

    def _first_port(self, uid: str, count: int) -> int:
        if uid not in self.port_starts:
            self.port_starts[uid] = self.next_port
            self.next_port += count
        return self.port_starts[uid]

    # --- the objects ------------------------------------------------------------------
    def _owned(self, flow: dict[str, Any], name: str, kind: str, api: str) -> dict[str, Any]:
        meta = flow["metadata"]
        return {
            "apiVersion": api.removeprefix("/apis/"),
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {
                    "dataworkflowservices.github.io/workflow.name": meta["name"],
                    "dataworkflowservices.github.io/workflow.namespace": meta["namespace"],
                },
                "ownerReferences": [
                    {
                        "apiVersion": flow["apiVersion"],
                        "kind": "Workflow",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
        }

    def _rabbits(self) -> dict[str, list[str]]:
        """rabbit -> the computes it serves, in order (k is the position)."""
        served: dict[str, list[str]] = {}
        for compute, rabbit in sorted(self.computes.items()):
            served.setdefault(rabbit, []).append(compute)
        return served

    def server_path(self, flow: dict[str, Any], index: int) -> Path:
        return self.prefix / f"{flow['metadata']['uid']}-{index}"

    def _directives(self, flow: dict[str, Any]) -> list[tuple[int, str, dict[str, str]]]:
        return [(i, *arguments(d)) for i, d in enumerate(flow["spec"]["dwDirectives"])]

    # --- the states -------------------------------------------------------------------
    def _proposal(
        self, flow: dict[str, Any], index: int, command: str, args: dict[str, str]
    ) -> str | None:
        ns = flow["metadata"]["namespace"]
        name = f"{flow['metadata']['name']}-{index}"
        if command == "container":
            source = self.admin.get(
                f"{NNF_API}/namespaces/{PROFILES}/nnfcontainerprofiles/{args['profile']}"
            )
            data = source["data"]
            for key, field_ in (("userID", "userID"), ("groupID", "groupID")):
                if data.get(key) is not None and data[key] != flow["spec"][field_]:
                    return (
                        f"container profile '{args['profile']}' is restricted to {key} {data[key]}"
                    )
            pinned = self._owned(flow, name, "NnfContainerProfile", NNF_API)
            pinned["data"] = {**copy.deepcopy(data), "pinned": True}
            _ensure(self.admin, f"{NNF_API}/namespaces/{ns}/nnfcontainerprofiles", pinned)
        elif command in (*STORAGE, "create_persistent"):
            breakdown = self._owned(flow, name, "DirectiveBreakdown", DWS_API)
            breakdown["spec"] = {"directive": flow["spec"]["dwDirectives"][index],
                                 "userID": flow["spec"]["userID"]}  # fmt: skip
            _ensure(self.admin, f"{DWS_API}/namespaces/{ns}/directivebreakdowns", breakdown)
        return None

    def _setup(self, flow: dict[str, Any], index: int, command: str, args: dict[str, str]) -> None:
        if command != "jobdw":
            return
        storage = self._owned(flow, f"{flow['metadata']['name']}-{index}", "NnfStorage", NNF_API)
        storage["spec"] = {
            "fileSystemType": args["type"],
            "userID": flow["spec"]["userID"],
            "groupID": flow["spec"]["groupID"],
            "allocationSets": [{
                "name": args["type"], "capacity": 1 << 30, "sharedAllocation": False,
                "nodes": [{"name": rabbit, "count": len(computes)}
                          for rabbit, computes in self._rabbits().items()],
            }],
        }  # fmt: skip
        _ensure(
            self.admin, f"{NNF_API}/namespaces/{flow['metadata']['namespace']}/nnfstorages", storage
        )

    def _kept(self, flow: dict[str, Any], index: int) -> bool:
        """Whether a container directive uses file system ``index``: NNF then
        keeps its rabbit-side mount to Teardown, else unmounts it at PostRun."""
        name = self._directives(flow)[index][2].get("name")
        return any(c == "container" and name in a.values() for _, c, a in self._directives(flow))

    def _access(self, flow: dict[str, Any], index: int, side: str, path: str) -> None:
        ns, wf = flow["metadata"]["namespace"], flow["metadata"]["name"]
        access = self._owned(flow, f"{wf}-{index}-{side}", "NnfAccess", NNF_API)
        access["metadata"]["labels"]["nnf.cray.hpe.com/directive_index"] = str(index)
        access["spec"] = {
            "desiredState": "mounted",
            "teardownState": "Teardown" if side == "servers" and self._kept(flow, index) else "PostRun",
            "target": "all" if side == "servers" else "single",
            "userID": flow["spec"]["userID"], "groupID": flow["spec"]["groupID"],
            "makeClientMounts": True, "ignoreOfflineComputes": False, "mountPath": path,
            "storageReference": {"kind": "NnfStorage", "name": f"{wf}-{index}", "namespace": ns},
        }  # fmt: skip
        if side == "computes":
            access["spec"]["clientReference"] = {"kind": "Computes", "name": wf, "namespace": ns}
        made = _ensure(self.admin, f"{NNF_API}/namespaces/{ns}/nnfaccesses", access)
        made["status"] = {"state": "mounted", "ready": True}
        self.admin.replace(
            f"{NNF_API}/namespaces/{ns}/nnfaccesses/{made['metadata']['name']}/status", made
        )

    def _client_mounts(self, flow: dict[str, Any], index: int, kind: str) -> None:
        """One per compute, in its namespace: which of its rabbit's
        directories (k) is the compute's."""
        ns, wf = flow["metadata"]["namespace"], flow["metadata"]["name"]
        for rabbit, computes in self._rabbits().items():
            for k, compute in enumerate(computes):
                self._namespace(compute)
                mount = {
                    "apiVersion": DWS_API.removeprefix("/apis/"),
                    "kind": "ClientMount",
                    "metadata": {
                        "name": f"{ns}-{wf}-{index}-computes",
                        "namespace": compute,
                        "labels": {  # the NnfAccess's, and it as the owner (nnf-sos' labels)
                            "dataworkflowservices.github.io/workflow.name": wf,
                            "dataworkflowservices.github.io/workflow.namespace": ns,
                            "dataworkflowservices.github.io/owner.kind": "NnfAccess",
                            "dataworkflowservices.github.io/owner.name": f"{wf}-{index}-computes",
                            "dataworkflowservices.github.io/owner.namespace": ns,
                        },
                    },
                    "spec": {"node": compute, "desiredState": "mounted", "mounts": [{
                        "mountPath": f"{COMPUTE_PREFIX}/{flow['metadata']['uid']}-{index}",
                        "options": "", "setPermissions": False, "targetType": "directory",
                        "type": kind, "compute": compute,
                        "device": {"type": "reference", "deviceReference": {
                            "objectReference": {"kind": "NnfNodeStorage",
                                                "name": f"{wf}-{index}-0", "namespace": rabbit},
                            "data": k}},
                    }]},
                }  # fmt: skip
                _ensure(self.admin, f"{DWS_API}/namespaces/{compute}/clientmounts", mount)

    def _namespace(self, name: str) -> None:
        _ensure(self.admin, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}})  # fmt: skip

    def _pre_run(
        self, flow: dict[str, Any], index: int, command: str, args: dict[str, str]
    ) -> None:
        env = flow["status"].setdefault("env", {})
        uid = flow["metadata"]["uid"]
        if command in STORAGE:
            kind = args.get("type") or self._persistent_type(args["name"])
            served = self.server_path(flow, index)
            served.mkdir(parents=True, exist_ok=True)
            if kind in ("gfs2", "xfs"):
                for rabbit, computes in self._rabbits().items():
                    for k in range(len(computes)):
                        (served / f"{rabbit}-{k}").mkdir(exist_ok=True)
            self._access(flow, index, "computes", f"{COMPUTE_PREFIX}/{uid}-{index}")
            self._access(flow, index, "servers", str(served))
            if kind in ("gfs2", "xfs"):
                self._client_mounts(flow, index, kind)
            prefix = "DW_JOB_" if command == "jobdw" else "DW_PERSISTENT_"
            env[prefix + args["name"].replace("-", "_")] = f"{COMPUTE_PREFIX}/{uid}-{index}"
        elif command == "container":
            self._container(flow, index, args, env)

    def _persistent_type(self, name: str) -> str:
        return "lustre"  # the tests' persistent file systems are Lustre

    def _container(
        self, flow: dict[str, Any], index: int, args: dict[str, str], env: dict[str, str]
    ) -> None:
        ns, wf = flow["metadata"]["namespace"], flow["metadata"]["name"]
        env["NNF_CONTAINER_SUBDOMAIN"] = wf
        env["NNF_CONTAINER_DOMAIN"] = f"{ns}.svc.cluster.local"
        env["NNF_CONTAINER_HOSTNAMES"] = " ".join(sorted(self._rabbits()))
        pinned = self.admin.get(f"{NNF_API}/namespaces/{ns}/nnfcontainerprofiles/{wf}-{index}")
        env.update(_ports(pinned["data"], lambda n: self._first_port(flow["metadata"]["uid"], n)))
        if pinned["data"].get("createContainer", True):
            return  # NNF would start its own pods: not what a MiniCluster is for
        by_name = {a["name"]: (i, c) for i, c, a in self._directives(flow) if c in STORAGE}
        volumes = []
        for key, target in sorted(args.items()):
            if not key.startswith(("DW_JOB_", "DW_PERSISTENT_")) or target not in by_name:
                continue
            directive, command = by_name[target]
            volumes.append({
                "name": key.split("_", 2)[2].replace("_", "-"), "command": command,
                "directiveIndex": directive, "mountPath": str(self.server_path(flow, directive)),
            })  # fmt: skip
        data = self._owned(flow, f"{wf}-{index}", "NnfContainerData", NNF_API)
        data["data"] = {"volumes": volumes}
        _ensure(self.admin, f"{NNF_API}/namespaces/{ns}/nnfcontainerdata", data)

    def _post_run(
        self, flow: dict[str, Any], index: int, command: str, args: dict[str, str]
    ) -> None:
        if command not in STORAGE:
            return
        ns, wf = flow["metadata"]["namespace"], flow["metadata"]["name"]
        for side in ("computes", "servers"):
            path = f"{NNF_API}/namespaces/{ns}/nnfaccesses/{wf}-{index}-{side}"
            if self.admin.get(path)["spec"]["teardownState"] == "PostRun":
                self.admin.patch(path, {"spec": {"desiredState": "unmounted"}}, "merge")

    def _teardown(
        self, flow: dict[str, Any], index: int, command: str, args: dict[str, str]
    ) -> None:
        ns, wf = flow["metadata"]["namespace"], flow["metadata"]["name"]
        doomed = [
            f"{NNF_API}/namespaces/{ns}/nnfaccesses/{wf}-{index}-{side}"
            for side in ("computes", "servers")
        ]
        doomed.append(f"{NNF_API}/namespaces/{ns}/nnfstorages/{wf}-{index}")
        doomed.append(f"{DWS_API}/namespaces/{ns}/directivebreakdowns/{wf}-{index}")
        for compute in self.computes:
            doomed.append(f"{DWS_API}/namespaces/{compute}/clientmounts/{ns}-{wf}-{index}-computes")
        for path in doomed:
            try:
                self.admin.delete(path)
            except ApiError as error:
                if error.status != 404:
                    raise

    # --- serving a Workflow -----------------------------------------------------------
    def serve(self, namespace: str, name: str) -> bool:
        """Do the current state's work for every ``nnf`` entry not yet
        completed, then complete them. True when there was work."""
        path = f"{DWS_API}/namespaces/{namespace}/workflows/{name}"
        flow = self.admin.get(path)
        status = flow.get("status") or {}
        state = status.get("state")
        if not state or state != flow["spec"]["desiredState"] or status.get("ready"):
            return False
        entries = [d for d in status.get("drivers") or []
                   if d["driverID"] == DRIVER and d["watchState"] == state and not d["completed"]]  # fmt: skip
        if not entries:
            return False
        work = {"Proposal": self._proposal, "Setup": self._setup, "PreRun": self._pre_run,
                "PostRun": self._post_run, "Teardown": self._teardown}.get(state)  # fmt: skip
        directives = self._directives(flow)
        for entry in entries:
            _, command, args = directives[entry["dwdIndex"]]
            problem = work(flow, entry["dwdIndex"], command, args) if work else None
            if problem:
                entry.update(status="Error", message=problem, error=problem)
                continue
            entry.update(completed=True, status="Completed", completeTime=_now())
            entry.pop("message", None)
            entry.pop("error", None)
        try:
            self.admin.replace(path, flow)  # as nnf-sos: the whole object, at its version
        except ApiError as error:
            if error.status == 409:
                return False  # the controller wrote first: the next call does it again
            raise
        self.seen.append(f"{state} {name}")
        return True
