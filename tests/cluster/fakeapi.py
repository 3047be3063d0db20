"""An HTTP-level fake of the Kubernetes API server, for tests without a cluster.

It serves lightkube through ``httpx2.MockTransport`` and behaves like the real
thing where fluxhop depends on it:

* it keeps state and ``resourceVersion``s; server-side apply creates absent
  objects and leaves an unchanged object (and its resourceVersion) alone, and
  conflicts (409) where it would set a field a merge patch (another field
  manager's update) set to another value, unless forced;
* it **rejects every write that fails the real schemas**
  (kubernetes-validate for built-in kinds, the CRDs for JobSet/MiniCluster),
  with 422 like the API server, so it cannot accept what a cluster refuses;
* deletes cascade through ``ownerReferences`` (the garbage collector);
* watches stream events, resume from a resourceVersion, answer an expired one
  with ``410 Gone``, and can be dropped;
* faults (403/404/409/410/429/500...) can be injected per request;
* a small "controller manager" turns Jobs (and JobSets, and MiniClusters, via
  a Job) into pods that go Pending -> Running -> Succeeded/Failed, refuse to
  start before their ConfigMap and Secret volumes exist, write logs and exit
  with the code a test's ``runner`` decides. As on a real cluster (see
  tests/realk8s/test_fake_parity.py): a pod's DELETE or eviction is graceful
  (a running container exits 143, then the pod goes), a deleted pod fails
  its Job (backoffLimit 0) and an evicted one is replaced; the Job controller
  writes Suspended, deletes the pods of a suspended Job and those above a
  smaller size, and ends a Job in two steps (SuccessCriteriaMet or
  FailureTarget, the rest of its pods terminated, then Complete or Failed);
  the TTL controller deletes a finished Job with ttlSecondsAfterFinished 0;
  the log of a pod not yet scheduled is empty.

Everything else a real cluster does (scheduling, DNS, the operators) is out
of scope; fluxhop's end-to-end behaviour on a real cluster is not claimed
from these tests.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import yaml

from tests.schemas import SchemaError, validate

RESOURCES = {
    ("api/v1", "configmaps"): ("v1", "ConfigMap"),
    ("api/v1", "persistentvolumeclaims"): ("v1", "PersistentVolumeClaim"),
    ("api/v1", "secrets"): ("v1", "Secret"),
    ("api/v1", "services"): ("v1", "Service"),
    ("api/v1", "pods"): ("v1", "Pod"),
    ("api/v1", "events"): ("v1", "Event"),
    ("apis/networking.k8s.io/v1", "networkpolicies"): ("networking.k8s.io/v1", "NetworkPolicy"),
    ("apis/batch/v1", "jobs"): ("batch/v1", "Job"),
    ("apis/jobset.x-k8s.io/v1alpha2", "jobsets"): ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("apis/flux-framework.org/v1alpha2", "miniclusters"): (
        "flux-framework.org/v1alpha2",
        "MiniCluster",
    ),
    ("apis/trainer.kubeflow.org/v1alpha1", "trainjobs"): (
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
    ),
    ("apis/kueue.x-k8s.io/v1beta2", "workloads"): ("kueue.x-k8s.io/v1beta2", "Workload"),
    ("apis/kueue.x-k8s.io/v1beta2", "resourceflavors"): (
        "kueue.x-k8s.io/v1beta2",
        "ResourceFlavor",
    ),
    ("apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses"): (
        "kueue.x-k8s.io/v1beta2",
        "WorkloadPriorityClass",
    ),
    ("apis/kueue.x-k8s.io/v1beta2", "localqueues"): ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    ("apis/kueue.x-k8s.io/v1beta2", "clusterqueues"): ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    ("apis/kueue.x-k8s.io/v1beta2", "admissionchecks"): (
        "kueue.x-k8s.io/v1beta2",
        "AdmissionCheck",
    ),
    ("apis/kopf.dev/v1", "kopfpeerings"): ("kopf.dev/v1", "KopfPeering"),
    # NNF's, read by rabbit MiniClusters; served only with crds=NNF_KINDS, written by seed()
    ("apis/nnf.cray.hpe.com/v1alpha11", "nnfcontainerprofiles"): (
        "nnf.cray.hpe.com/v1alpha11",
        "NnfContainerProfile",
    ),
    ("apis/nnf.cray.hpe.com/v1alpha11", "nnfcontainerdata"): (
        "nnf.cray.hpe.com/v1alpha11",
        "NnfContainerData",
    ),
    ("apis/nnf.cray.hpe.com/v1alpha11", "nnfaccesses"): ("nnf.cray.hpe.com/v1alpha11", "NnfAccess"),
    ("apis/dataworkflowservices.github.io/v1alpha7", "workflows"): (
        "dataworkflowservices.github.io/v1alpha7",
        "Workflow",
    ),
    ("apis/dataworkflowservices.github.io/v1alpha7", "clientmounts"): (
        "dataworkflowservices.github.io/v1alpha7",
        "ClientMount",
    ),
    ("apis/kopf.dev/v1", "clusterkopfpeerings"): ("kopf.dev/v1", "ClusterKopfPeering"),
    ("api/v1", "nodes"): ("v1", "Node"),  # seeded by tests; patched (tainted) by the operator
    # seeded by tests; read to choose where rank 0 keeps its state
    ("apis/storage.k8s.io/v1", "storageclasses"): ("storage.k8s.io/v1", "StorageClass"),
    ("apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicies"): (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicy",
    ),
}
# Installed by default: JobSet, MiniCluster, TrainJob. Kueue's kinds are served
# only with crds=... including them (KUEUE_KINDS); tests acting as Kueue write
# their decisions (tests/cluster/kueue.py), and fluxhop operator writes a queued
# resource's Workload, checked against Kueue's CRD where tests/schemas.py finds it.
NNF_KINDS = {"NnfContainerProfile", "NnfContainerData", "NnfAccess", "ClientMount", "Workflow"}
KUEUE_KINDS = {
    "Workload", "ResourceFlavor", "WorkloadPriorityClass", "LocalQueue", "ClusterQueue",
    "AdmissionCheck",
}  # fmt: skip
CRD_KINDS = {
    "JobSet", "MiniCluster", "TrainJob", "KopfPeering", "ClusterKopfPeering", *KUEUE_KINDS,
    *NNF_KINDS,
}  # fmt: skip
DEFAULT_CRDS = {"JobSet", "MiniCluster", "TrainJob"}
# Cluster-wide list/watch of a namespaced kind (/apis/G/V/PLURAL), and the
# objects of a cluster-scoped kind (/apis/G/V/PLURAL/NAME): namespace "".
CLUSTER_PATH = re.compile(r"^/(api/v1|apis/[^/]+/[^/]+)/([^/]+)(?:/([^/]+))?$")
CLUSTER_SCOPED = {
    "ClusterKopfPeering", "Node", "StorageClass", "MutatingAdmissionPolicy",
    "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "AdmissionCheck",
}  # fmt: skip
ALL_NAMESPACES = ""
PATH = re.compile(
    r"^/(api/v1|apis/[^/]+/[^/]+)/namespaces/([^/]+)/([^/]+)(?:/([^/]+)(?:/([^/]+))?)?$"
)
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
ACTIVE = ("Pending", "Running")
# (reason, message) of the Job controller's conditions
SUCCESS = ("SuccessPolicy", "Matched rules at index 0")
BACKOFF = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
FieldPath = tuple[str, ...]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> httpx2.Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return httpx2.Response(code, json=body, headers={"content-type": "application/json"})


def not_found(kind: str, name: str) -> httpx2.Response:
    return status(
        404, "NotFound", f'{kind.lower()}s "{name}" not found', {"name": name, "kind": kind}
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


MISSING = object()


def leaves(patch: dict[str, Any], prefix: FieldPath = ()) -> list[FieldPath]:
    """The paths a merge patch sets (or removes): its non-object values."""
    paths: list[FieldPath] = []
    for key, value in patch.items():
        if isinstance(value, dict) and value:
            paths += leaves(value, (*prefix, key))
        else:
            paths.append((*prefix, key))
    return paths


def lookup(obj: Any, path: FieldPath) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def assign(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value


def matches(labels: dict[str, str] | None, selector: str | None) -> bool:
    if not selector:
        return True
    labels = labels or {}
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


@dataclass
class Seen:
    """One request the fake received."""

    method: str
    path: str
    params: dict[str, str]
    content_type: str

    @property
    def verb(self) -> str:
        if self.method == "PATCH" and "apply-patch" in self.content_type:
            return "APPLY"
        if self.method == "GET" and self.params.get("watch") == "true":
            return "WATCH"
        if self.method == "GET" and self.path.endswith("/log"):
            return "LOG"
        return self.method

    @property
    def resource(self) -> str:
        match = PATH.match(self.path)
        if not match:
            return self.path
        return "/".join(part for part in match.group(3, 4) if part)

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}"


@dataclass
class Fault:
    """Answer matching requests with an error, ``times`` times."""

    method: str
    path_contains: str
    code: int
    times: int = 1
    reason: str = ""
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    named: bool = True
    # "error": answer ``code``; "lost": carry the request out, then lose the
    # answer (a read timeout); "hang": no answer at all (a read timeout, nothing
    # done); "garbage": 200 with a body that is not JSON; "text": ``code`` with
    # a plain-text body, as API servers send "404 page not found" for a group
    # they do not serve; "bare": ``code`` with no Content-Type (some proxies').
    mode: str = "error"

    def response(self, name: str | None) -> httpx2.Response:
        if self.mode == "garbage":
            return httpx2.Response(200, text="<html>a proxy's error page</html>")
        if self.mode == "bare":
            return httpx2.Response(self.code, content=b"not found\n")
        if self.mode == "text":
            return httpx2.Response(
                self.code, text="404 page not found\n", headers={"content-type": "text/plain"}
            )
        reasons = {
            403: "Forbidden",
            404: "NotFound",
            409: "AlreadyExists",
            410: "Expired",
            429: "TooManyRequests",
            500: "InternalError",
            401: "Unauthorized",
        }
        details = {"name": name} if self.named and name else None
        response = status(
            self.code,
            self.reason or reasons.get(self.code, "Error"),
            self.message or f"injected {self.code}",
            details,
        )
        response.headers.update(self.headers)
        return response


# (pod, completion index) -> (log lines, exit code), or None while it still runs
Runner = Callable[[dict[str, Any], int], tuple[list[str], int] | None]


def disrupted(pod: dict[str, Any]) -> bool:
    """Failed by a disruption (eviction, preemption, a node drain), which the
    Job's podFailurePolicy ignores: the Job controller replaces the pod."""
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in pod["status"].get("conditions", [])
    )


def default_runner(pod: dict[str, Any], index: int) -> tuple[list[str], int]:
    return ([f"hello from rank {index}\n"] if index == 0 else []), 0


class FakeAPIServer:
    """A namespaced Kubernetes API with just enough controllers for fluxhop."""

    def __init__(
        self,
        *,
        runner: Runner = default_runner,
        crds: set[str] | None = None,
        controllers: bool = True,
    ) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.store: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.history: list[tuple[int, str, str, str, dict[str, Any]]] = []
        self.rv = itertools.count(1000)
        self.last_rv = 999
        self.compacted_rv = 0
        self.requests: list[Seen] = []
        self.faults: list[Fault] = []
        self.drop_watch_after: int | None = None
        self.crds = DEFAULT_CRDS if crds is None else crds
        self.runner = runner
        self.schedulable = True
        self.flux_operator = True  # a stand-in Flux Operator turns MiniClusters into Jobs
        # RBAC as the API server enforces it: None lets everything through;
        # a ClusterRole's rules refuse every request they do not allow with 403.
        self.rbac: list[dict[str, Any]] | None = None
        self.refused: list[str] = []  # "verb resource" of every request RBAC refused
        # whose requests RBAC judges (their bearer token); None: everyone's
        self.rbac_token: str | None = None
        # mutating admission, as the API server runs it on every create (dry
        # runs included): (kind, object) -> None, changing the object
        self.admission: list[Callable[[str, dict[str, Any]], None]] = []
        self.step_delay = 0.005
        # controller steps a pod the garbage collector deletes stays (marked
        # deleted, its containers stopped) before it goes, as real pods do
        # within their grace period; 0: at once
        self.collected_pods_linger = 0
        self.lingering: dict[tuple[str, str], int] = {}  # (namespace, pod) -> steps left
        # whether a running pod's readinessProbe passes (False: its Flux
        # instance never comes up, as when a broker cannot join)
        self.pods_ready = True
        # completion index -> exit code: that worker's broker fails as it starts
        self.failing_ranks: dict[int, int] = {}
        # pods/exec (tests/cluster/fakeexec.py): (pod, container, argv) ->
        # (exit code, stdout, stderr); None: exec answers 400 as for no container
        self.exec_runner: Callable[[str, str, list[str]], tuple[int, str, str]] | None = None
        self.logs: dict[tuple[str, str], list[str]] = {}
        # the Job controller's count of failed pods, by Job uid (pod uids)
        self.failures: dict[str, set[str]] = {}
        # per object, the fields a non-apply write (a merge patch) set last:
        # path -> (field manager, apiVersion), for server-side apply's conflicts
        self.updaters: dict[tuple[str, str, str], dict[FieldPath, tuple[str, str]]] = {}
        self.closed = False
        self.controller = threading.Thread(
            target=self._control_loop, name="fake-controllers", daemon=True
        )
        if controllers:
            self.controller.start()

    # --- plumbing -------------------------------------------------------------------

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()
        if self.controller.is_alive():
            self.controller.join(timeout=5)

    def fail(
        self, method: str, path_contains: str, code: int, times: int = 1, **kwargs: Any
    ) -> Fault:
        fault = Fault(method, path_contains, code, times, **kwargs)
        self.faults.append(fault)
        return fault

    def seen(self, *verbs: str) -> list[str]:
        """The requests so far, as "VERB resource" strings (optionally filtered)."""
        return [str(r) for r in self.requests if not verbs or r.verb in verbs]

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        with self.lock:
            obj = self.store.get((kind, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def objects(
        self, namespace: str = "default", kinds: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        with self.lock:
            return [
                copy.deepcopy(o)
                for (k, ns, _), o in sorted(self.store.items())
                if ns == namespace and (not kinds or k in kinds) and k != "Event"
            ]

    def seed(self, kind: str, obj: dict[str, Any], namespace: str = "default") -> None:
        """An object as another controller (NNF, Kueue) would have written it."""
        api_version = next(v for v, k in RESOURCES.values() if k == kind)
        obj = {"apiVersion": api_version, "kind": kind, **copy.deepcopy(obj)}
        obj["metadata"] = {"namespace": namespace, "uid": str(uuid.uuid4()), **obj["metadata"]}
        with self.lock:
            self._put(kind, namespace, obj, "ADDED")

    def _bump(self, event: str, kind: str, namespace: str, obj: dict[str, Any]) -> None:
        version = next(self.rv)
        self.last_rv = version
        obj["metadata"]["resourceVersion"] = str(version)
        self.history.append((version, event, kind, namespace, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _put(self, kind: str, namespace: str, obj: dict[str, Any], event: str) -> None:
        self.store[(kind, namespace, obj["metadata"]["name"])] = obj
        self._bump(event, kind, namespace, obj)

    # --- HTTP -----------------------------------------------------------------------

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        url = urlsplit(str(request.url))
        params = {k: v[-1] for k, v in parse_qs(url.query).items()}
        seen = Seen(request.method, url.path, params, request.headers.get("content-type", ""))
        with self.lock:
            self.requests.append(seen)
            if self.closed:
                return status(503, "ServiceUnavailable", "fake server closed")
        match = PATH.match(url.path)
        if match:
            prefix, namespace, plural, name, sub = match.groups()
        else:
            wide = CLUSTER_PATH.match(url.path)
            if not wide or wide.group(2) == "namespaces":
                return status(404, "NotFound", "the server could not find the requested resource")
            prefix, plural, name = wide.groups()
            namespace, sub = ALL_NAMESPACES, None
            scoped = RESOURCES.get((prefix, plural), ("", ""))[1] in CLUSTER_SCOPED
            if name is not None and not scoped:
                return status(404, "NotFound", "the server could not find the requested resource")
        if (prefix, plural) not in RESOURCES:
            return status(404, "NotFound", "the server could not find the requested resource")
        api_version, kind = RESOURCES[(prefix, plural)]
        if kind in CRD_KINDS and kind not in self.crds:
            return status(404, "NotFound", "the server could not find the requested resource")
        refused = None
        token = self.rbac_token
        if token is None or request.headers.get("authorization") == f"Bearer {token}":
            refused = self._forbidden(prefix, plural, namespace, name, sub, request.method, params)
            if refused is None and self._applies_a_new_object(request, kind, namespace, name):
                # as the API server does: an apply that makes the object is also a create
                refused = self._forbidden(prefix, plural, namespace, name, sub, "POST", params)
        if refused is not None:
            return refused
        lost = False
        for fault in self.faults:
            if (
                fault.times > 0
                and fault.method == request.method
                and fault.path_contains in url.path
            ):
                fault.times -= 1
                if fault.mode == "hang":
                    raise httpx2.ReadTimeout("timed out (injected: no answer)", request=request)
                if fault.mode == "lost":
                    lost = True
                    break
                return fault.response(name)
        response = self._answer(request, kind, api_version, namespace, name, sub, params, seen)
        if lost:
            raise httpx2.ReadTimeout(
                "timed out (injected: answer lost after commit)", request=request
            )
        return response

    def _applies_a_new_object(
        self, request: httpx2.Request, kind: str, namespace: str, name: str | None
    ) -> bool:
        apply = request.headers.get("content-type", "").startswith("application/apply-patch")
        if request.method != "PATCH" or not apply or name is None:
            return False
        with self.lock:
            return (kind, namespace, name) not in self.store

    def _forbidden(
        self,
        prefix: str,
        plural: str,
        namespace: str,
        name: str | None,
        sub: str | None,
        method: str,
        params: dict[str, str],
    ) -> httpx2.Response | None:
        if self.rbac is None:
            return None
        group = "" if prefix == "api/v1" else prefix.split("/")[1]
        resource = f"{plural}/{sub}" if sub else plural
        if method == "GET" and sub == "exec":
            verb = "create"  # a WebSocket upgrade: Kubernetes 1.35+ authorizes it as create
        elif method == "GET":
            verb = "watch" if params.get("watch") == "true" else ("get" if name else "list")
        else:
            verb = {"PATCH": "patch", "POST": "create", "DELETE": "delete", "PUT": "update"}[method]
        for rule in self.rbac:
            if (
                group in rule.get("apiGroups", [])
                and resource in rule.get("resources", [])
                and (verb in rule.get("verbs", []) or "*" in rule.get("verbs", []))
            ):
                return None
        where = f'in API group "{group}" in the namespace "{namespace}"'
        self.refused.append(f"{verb} {resource}")
        return status(
            403,
            "Forbidden",
            f'{resource} "{name or ""}" is forbidden: User "system:serviceaccount:fluxhop-system:'
            f'fluxhop-operator" cannot {verb} resource "{resource}" {where}',
        )

    def _answer(
        self,
        request: httpx2.Request,
        kind: str,
        api_version: str,
        namespace: str,
        name: str | None,
        sub: str | None,
        params: dict[str, str],
        seen: Seen,
    ) -> httpx2.Response:
        if request.method == "GET" and sub == "log":
            return self._log(namespace, name, params)
        if request.method == "GET" and kind == "Pod" and sub == "exec":
            return self._exec(namespace, name, request)
        if request.method == "GET" and name is None:
            if params.get("watch") == "true":
                return self._watch(kind, namespace, params)
            return self._list(api_version, kind, namespace, params)
        if request.method == "POST" and name is None:
            return self._create(kind, namespace, request, dry_run=params.get("dryRun") == "All")
        if request.method == "POST" and kind == "Pod" and sub == "eviction":
            return self._eviction(namespace, name, request)
        if request.method == "GET" and sub == "scale":
            return self._scale(kind, namespace, name, None)
        if request.method == "GET":
            return self._get(kind, namespace, name)
        if request.method == "PATCH" and sub == "status":
            return self._patch_status(kind, namespace, name, request)
        if request.method == "PATCH" and sub == "scale":
            return self._scale(kind, namespace, name, request)
        if request.method == "PATCH":
            return self._patch(api_version, kind, namespace, name, request, seen.content_type)
        if request.method == "DELETE":
            return self._delete(kind, namespace, name)
        return status(405, "MethodNotAllowed", f"{request.method} is not supported by the fake")

    def _get(self, kind: str, namespace: str, name: str) -> httpx2.Response:
        with self.lock:
            obj = self.store.get((kind, namespace, name))
            if obj is None:
                return not_found(kind, name)
            return httpx2.Response(200, json=copy.deepcopy(obj))

    def _list(
        self, api_version: str, kind: str, namespace: str, params: dict[str, str]
    ) -> httpx2.Response:
        selector = params.get("labelSelector")
        fields = params.get("fieldSelector", "")
        with self.lock:
            items = []
            for (k, ns, _), obj in sorted(self.store.items()):
                if (
                    k != kind
                    or namespace not in (ALL_NAMESPACES, ns)
                    or not matches(obj["metadata"].get("labels"), selector)
                ):
                    continue
                if (
                    fields.startswith("involvedObject.name=")
                    and obj.get("involvedObject", {}).get("name") != fields.split("=", 1)[1]
                ):
                    continue
                items.append(copy.deepcopy(obj))
            body = {
                "apiVersion": api_version,
                "kind": f"{kind}List",
                "metadata": {"resourceVersion": str(self.last_rv)},
                "items": items,
            }
        return httpx2.Response(200, json=body)

    def _patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        request: httpx2.Request,
        content_type: str,
    ) -> httpx2.Response:
        try:
            body = yaml.safe_load(request.content)
        except yaml.YAMLError as err:
            return status(400, "BadRequest", f"cannot decode body: {err}")
        updated: list[FieldPath] = []
        with self.lock:
            existing = self.store.get((kind, namespace, name))
            if "apply-patch" in content_type:
                if (
                    not isinstance(body, dict)
                    or body.get("kind") != kind
                    or body.get("apiVersion") != api_version
                ):
                    return status(400, "BadRequest", "apply body does not match the URL's kind")
                if body.get("metadata", {}).get("name") != name:
                    return status(400, "BadRequest", "the name in the body does not match the URL")
                if "fieldManager" not in request.url.params:
                    return status(400, "BadRequest", "fieldManager is required for apply")
                candidate = copy.deepcopy(body)
                if existing is not None:
                    force = request.url.params.get("force") == "true"
                    refused = self._apply_conflicts(kind, namespace, name, body, existing, force)
                    if refused is not None:
                        return refused
                    for path in self.updaters.get((kind, namespace, name), {}):
                        # another manager's field the apply leaves out stays as it is
                        if lookup(body, path) is MISSING and lookup(existing, path) is not MISSING:
                            assign(candidate, path, copy.deepcopy(lookup(existing, path)))
            elif "merge-patch" in content_type:
                if existing is None:
                    return status(
                        404,
                        "NotFound",
                        f'{kind.lower()}s "{name}" not found',
                        {"name": name, "kind": kind},
                    )
                stale = self._stale(kind, name, existing, body)
                if stale is not None:
                    return stale
                candidate = merge_patch(existing, body)
                updated = [p for p in leaves(body) if lookup(existing, p) != lookup(candidate, p)]
            else:
                return status(415, "UnsupportedMediaType", f"unsupported patch type {content_type}")
            candidate.setdefault("metadata", {})["namespace"] = namespace
            if existing is not None:
                for key in SERVER_FIELDS:
                    if key in existing["metadata"]:
                        candidate["metadata"][key] = existing["metadata"][key]
                if "status" in existing and "status" not in body:
                    candidate["status"] = existing["status"]
                if candidate == existing:
                    return httpx2.Response(
                        200, json=copy.deepcopy(existing)
                    )  # no change, same resourceVersion
                if candidate.get("spec") != existing.get("spec"):
                    candidate["metadata"]["generation"] = (
                        existing["metadata"].get("generation", 1) + 1
                    )
            else:
                candidate["metadata"].update(
                    uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1
                )
            try:
                validate(candidate)
            except SchemaError as err:
                return status(
                    422, "Invalid", f"{kind} {name} is invalid: {err}", {"name": name, "kind": kind}
                )
            self._put(kind, namespace, candidate, "MODIFIED" if existing else "ADDED")
            manager = request.url.params.get("fieldManager") or "unknown"
            for path in updated:
                self.record_update(kind, namespace, name, path, manager)
            return httpx2.Response(201 if existing is None else 200, json=copy.deepcopy(candidate))

    def record_update(
        self, kind: str, namespace: str, name: str, path: FieldPath, manager: str
    ) -> None:
        """Field ``path`` of an object was set by ``manager`` with an update
        (a merge patch, or a controller's write), not an apply: server-side
        apply's field management then gives that manager the field."""
        obj = self.store[(kind, namespace, name)]
        owners = self.updaters.setdefault((kind, namespace, name), {})
        owners[path] = (manager, obj["apiVersion"])

    def _apply_conflicts(
        self,
        kind: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        existing: dict[str, Any],
        force: bool,
    ) -> httpx2.Response | None:
        """As server-side apply merges by field manager: an apply that sets a
        field another manager's update set, to another value, is a conflict
        (409), unless forced (the applier then takes the field)."""
        owners = self.updaters.get((kind, namespace, name), {})
        conflicts = []
        for path, (manager, version) in sorted(owners.items()):
            wanted = lookup(body, path)
            if wanted is MISSING or wanted == lookup(existing, path):
                continue  # left out, or the same value: no conflict
            conflicts.append((f'"{manager}" using {version}', "." + ".".join(path)))
        if force:
            for path in [p for p in owners if lookup(body, p) is not MISSING]:
                del owners[path]
            return None
        if not conflicts:
            return None
        if len(conflicts) == 1:
            who, path = conflicts[0]
            message = f"Apply failed with 1 conflict: conflict with {who}: {path}"
        else:
            lines = []
            for who in sorted({w for w, _ in conflicts}):
                lines.append(f"conflicts with {who}:")
                lines += [f"- {path}" for w, path in conflicts if w == who]
            message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
        causes = [
            {"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": path}
            for who, path in conflicts
        ]
        return status(409, "Conflict", message, {"causes": causes})

    def _eviction(self, namespace: str, name: str, request: httpx2.Request) -> httpx2.Response:
        """POST pods/NAME/eviction, the eviction API (no PodDisruptionBudgets here)."""
        try:
            body = json.loads(request.content)
        except ValueError as err:
            return status(400, "BadRequest", f"cannot decode body: {err}")
        if not isinstance(body, dict) or body.get("kind") != "Eviction":
            return status(400, "BadRequest", "the body of an eviction is an Eviction")
        with self.changed:
            pod = self.store.get(("Pod", namespace, name))
            if pod is None:
                return not_found("Pod", name)
            self._evict(namespace, pod)
        ok = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        return httpx2.Response(201, json=ok)

    def _create(
        self, kind: str, namespace: str, request: httpx2.Request, *, dry_run: bool = False
    ) -> httpx2.Response:
        """POST: admitted (self.admission), validated and stored; with
        ``dry_run`` (dryRun=All) answered the same and stored nowhere."""
        body = json.loads(request.content)
        meta = body.setdefault("metadata", {})
        if "name" not in meta and "generateName" in meta:
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        with self.lock:
            if (kind, namespace, name) in self.store:
                return status(409, "AlreadyExists", f'{kind.lower()}s "{name}" already exists')
            meta["namespace"] = namespace
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            for admit in self.admission:
                admit(kind, body)
            try:
                validate(body)
            except SchemaError as err:
                return status(422, "Invalid", f"{kind} {name} is invalid: {err}")
            if not dry_run:
                self._put(kind, namespace, body, "ADDED")
            return httpx2.Response(201, json=copy.deepcopy(body))

    @staticmethod
    def _stale(kind: str, name: str, existing: dict[str, Any], body: Any) -> httpx2.Response | None:
        """A patch that names a resourceVersion applies only to that version
        (the API server's precondition): 409 if the object changed since."""
        wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if wanted is None or wanted == existing["metadata"].get("resourceVersion"):
            return None
        message = (
            f'Operation cannot be fulfilled on {kind.lower()}s "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again"
        )
        return status(409, "Conflict", message)

    def _patch_status(
        self, kind: str, namespace: str, name: str, request: httpx2.Request
    ) -> httpx2.Response:
        """The status subresource: only .status changes, the generation stays."""
        body = json.loads(request.content)
        with self.lock:
            existing = self.store.get((kind, namespace, name))
            if existing is None:
                return not_found(kind, name)
            stale = self._stale(kind, name, existing, body)
            if stale is not None:
                return stale
            candidate = copy.deepcopy(existing)
            candidate["status"] = merge_patch(
                existing.get("status") or {}, body.get("status") or {}
            )
            if candidate == existing:
                return httpx2.Response(200, json=copy.deepcopy(existing))
            try:
                validate(candidate)
            except SchemaError as err:
                return status(422, "Invalid", f"{kind} {name} is invalid: {err}")
            self._put(kind, namespace, candidate, "MODIFIED")
            return httpx2.Response(200, json=copy.deepcopy(candidate))

    def _scale(
        self, kind: str, namespace: str, name: str, request: httpx2.Request | None
    ) -> httpx2.Response:
        """The scale subresource of a MiniCluster (spec.size, status.size/selector)."""
        with self.lock:
            existing = self.store.get((kind, namespace, name))
            if existing is None or kind != "MiniCluster":
                return not_found(kind, name)
            if request is not None:
                replicas = json.loads(request.content).get("spec", {}).get("replicas")
                if not isinstance(replicas, int) or replicas < 0:
                    return status(422, "Invalid", "spec.replicas must be a non-negative integer")
                if replicas != existing["spec"].get("size"):
                    existing["spec"]["size"] = replicas
                    existing["metadata"]["generation"] = (
                        existing["metadata"].get("generation", 1) + 1
                    )
                    self._bump("MODIFIED", kind, namespace, existing)
            scale = {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": existing["spec"].get("size", 1)},
                "status": {
                    "replicas": (existing.get("status") or {}).get("size", 0),
                    "selector": (existing.get("status") or {}).get("selector", ""),
                },
            }
            return httpx2.Response(200, json=scale)

    def _delete(self, kind: str, namespace: str, name: str) -> httpx2.Response:
        with self.lock:
            obj = self.store.get((kind, namespace, name))
            if obj is None:
                return not_found(kind, name)
            if kind == "Pod":
                # graceful: no DisruptionTarget, so the Job controller counts
                # the failure (its podFailurePolicy ignores only disruptions)
                self._delete_pod(namespace, obj, counted=True)
            else:
                self._remove(kind, namespace, name)
            return httpx2.Response(
                200, json={"kind": "Status", "apiVersion": "v1", "status": "Success"}
            )

    def _remove(self, kind: str, namespace: str, name: str, *, foreground: bool = False) -> None:
        """Delete and cascade to dependents, like the garbage collector
        (``foreground``: the dependents go first, then the object)."""
        obj = self.store.get((kind, namespace, name))
        if obj is None:
            return
        if not foreground:
            del self.store[(kind, namespace, name)]
            self._bump("DELETED", kind, namespace, obj)
        uid = obj["metadata"].get("uid")
        for (k, ns, n), other in list(self.store.items()):
            owners = other["metadata"].get("ownerReferences") or []
            if ns == namespace and any(ref.get("uid") == uid for ref in owners):
                if k == "Pod" and self.collected_pods_linger:
                    self._linger(ns, other)
                else:
                    self._remove(k, ns, n)
        if foreground:
            del self.store[(kind, namespace, name)]
            self._bump("DELETED", kind, namespace, obj)
        self.updaters.pop((kind, namespace, name), None)

    def _linger(self, namespace: str, pod: dict[str, Any]) -> None:
        """A collected pod marked deleted, its running container stopped
        (143); it goes ``collected_pods_linger`` steps later (_reconcile)."""
        pod["metadata"].setdefault("deletionTimestamp", now())
        if pod["status"]["phase"] == "Running":
            self._terminate(namespace, pod, 143)
        else:
            self._bump("MODIFIED", "Pod", namespace, pod)
        self.lingering.setdefault((namespace, pod["metadata"]["name"]), self.collected_pods_linger)

    def owner_deleted(self, uid: str, namespace: str = "default") -> None:
        """The garbage collector's response to the deletion of an owner this
        fake does not serve (e.g. a DWS Workflow): remove its dependents."""
        with self.changed:
            for (kind, ns, name), other in list(self.store.items()):
                owners = other["metadata"].get("ownerReferences") or []
                if ns == namespace and any(ref.get("uid") == uid for ref in owners):
                    self._remove(kind, ns, name)

    def _watch(self, kind: str, namespace: str, params: dict[str, str]) -> httpx2.Response:
        selector = params.get("labelSelector")
        since = params.get("resourceVersion")
        if since is not None and int(since) < self.compacted_rv:
            # as the API server does: 200, then an ERROR event carrying 410
            expired = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {since} ({self.compacted_rv})",
                "reason": "Expired",
                "code": 410,
            }
            line = json.dumps({"type": "ERROR", "object": expired}) + "\n"
            return httpx2.Response(
                200, headers={"content-type": "application/json"}, content=line.encode()
            )
        return httpx2.Response(
            200,
            headers={"content-type": "application/json"},
            content=self._watch_stream(kind, namespace, selector, since),
        )

    def _watch_stream(
        self, kind: str, namespace: str, selector: str | None, since: str | None
    ) -> Iterator[bytes]:
        sent = 0
        with self.lock:
            if since is None:
                cursor = self.last_rv
                initial = [
                    copy.deepcopy(o)
                    for (k, ns, _), o in sorted(self.store.items())
                    if k == kind
                    and namespace in (ALL_NAMESPACES, ns)
                    and matches(o["metadata"].get("labels"), selector)
                ]
            else:
                cursor, initial = int(since), []
            drop = self.drop_watch_after
            self.drop_watch_after = None
        for obj in initial:
            if drop is not None and sent >= drop:
                return  # the connection drops; the client must resume
            yield (json.dumps({"type": "ADDED", "object": obj}) + "\n").encode()
            sent += 1
        while True:
            with self.changed:
                pending = [h for h in self.history if h[0] > cursor]
                if not pending:
                    if self.closed:
                        return
                    self.changed.wait(timeout=0.2)
                    continue
            for version, event, k, ns, obj in pending:
                cursor = version
                if (
                    k != kind
                    or namespace not in (ALL_NAMESPACES, ns)
                    or not matches(obj["metadata"].get("labels"), selector)
                ):
                    continue
                if drop is not None and sent >= drop:
                    return  # the connection drops; the client must resume
                yield (json.dumps({"type": event, "object": obj}) + "\n").encode()
                sent += 1

    def _exec(self, namespace: str, name: str, request: httpx2.Request) -> httpx2.Response:
        """An exec, answered as JSON for tests/cluster/fakeexec.py to stream."""
        query = parse_qs(urlsplit(str(request.url)).query, keep_blank_values=True)
        container, argv = query.get("container", [""])[-1], query.get("command", [])
        with self.lock:
            pod = self.store.get(("Pod", namespace, name))
            if pod is None:
                return not_found("pods", name)
            phase = pod.get("status", {}).get("phase")
            names = [c["name"] for c in pod["spec"]["containers"]]
        if container not in names:
            return status(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if phase != "Running" or self.exec_runner is None:
            return status(400, "BadRequest", f"container {container} is not running in pod {name}")
        code, out, err = self.exec_runner(name, container, argv)
        return httpx2.Response(200, json={"code": code, "stdout": out, "stderr": err})

    def _log(self, namespace: str, name: str, params: dict[str, str]) -> httpx2.Response:
        with self.lock:
            pod = self.store.get(("Pod", namespace, name))
            if pod is None:
                return status(
                    404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"}
                )
            if not pod["spec"].get("nodeName"):
                # as the API server does: no node, no kubelet to ask; 200, nothing
                return httpx2.Response(200, headers={"content-type": "text/plain"}, content=b"")
            if pod["status"].get("phase") == "Pending":
                container = params.get("container") or pod["spec"]["containers"][0]["name"]
                return status(
                    400,
                    "BadRequest",
                    f'container "{container}" in pod "{name}" is waiting to start: '
                    "ContainerCreating",
                )
        follow = params.get("follow") == "true"
        tail = int(params["tailLines"]) if "tailLines" in params else None
        stream = self._log_stream(namespace, name, follow, params.get("timestamps") == "true",
                                  tail=tail)  # fmt: skip
        return httpx2.Response(200, headers={"content-type": "text/plain"}, content=stream)

    def _log_stream(
        self,
        namespace: str,
        name: str,
        follow: bool,
        timestamps: bool = False,
        tail: int | None = None,
    ) -> Iterator[bytes]:
        with self.lock:  # tailLines: the last lines written so far, then what follows
            offset = 0 if tail is None else max(0, len(self.logs.get((namespace, name), [])) - tail)
        while True:
            with self.changed:
                lines = self.logs.get((namespace, name), [])
                chunk = lines[offset:]
                offset = len(lines)
                pod = self.store.get(("Pod", namespace, name))
                done = pod is None or pod["status"].get("phase") in ("Succeeded", "Failed")
                if not chunk and follow and not done and not self.closed:
                    self.changed.wait(timeout=0.2)
                    continue
            for number, line in enumerate(chunk, start=offset - len(chunk)):
                # the kubelet's RFC3339Nano stamp, one nanosecond a line here
                stamp = f"2026-01-01T00:00:00.{number + 1:09d}Z " if timestamps else ""
                yield (stamp + line).encode()
            if not follow or done or self.closed:
                return

    # --- controllers ----------------------------------------------------------------

    def reconcile(self) -> None:
        """One step of every controller, now (tests use it instead of waiting)."""
        with self.changed:
            self._reconcile()
            self.changed.notify_all()

    def _control_loop(self) -> None:
        while True:
            with self.changed:
                if self.closed:
                    return
                self._reconcile()
            time.sleep(self.step_delay)

    def _reconcile(self) -> None:
        for (namespace, name), steps in list(self.lingering.items()):
            if steps > 1:
                self.lingering[(namespace, name)] = steps - 1
                continue
            del self.lingering[(namespace, name)]
            self._remove("Pod", namespace, name)
        for key, obj in list(self.store.items()):
            kind, namespace, _ = key
            if self.store.get(key) is not obj:
                continue  # deleted by a controller earlier in this step
            if kind == "MiniCluster" and self.flux_operator:
                self._operator(namespace, obj)
            elif kind == "JobSet":
                self._jobset(namespace, obj)
            elif kind == "Job":
                self._job(namespace, obj)
        for key, pod in list(self.store.items()):
            if key[0] == "Pod" and self.store.get(key) is pod:
                self._kubelet(key[1], pod)

    def _owned(self, obj: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _operator(self, namespace: str, mc: dict[str, Any]) -> None:
        """The Flux Operator, reduced to: a MiniCluster becomes an Indexed Job."""
        name = mc["metadata"]["name"]
        if ("Job", namespace, name) in self.store:
            job = self.store[("Job", namespace, name)]
            if job["spec"]["parallelism"] != mc["spec"].get("size", 1):
                job["spec"]["parallelism"] = job["spec"]["completions"] = mc["spec"].get("size", 1)
                self._bump("MODIFIED", "Job", namespace, job)
            return
        size = mc["spec"].get("size", 1)
        container = {"name": name, "image": mc["spec"]["containers"][0].get("image", "app")}
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "ownerReferences": [self._owned(mc)],
            },
            "spec": {
                "completionMode": "Indexed",
                "parallelism": size,
                "completions": size,
                "template": {"metadata": {"labels": {}}, "spec": {"containers": [container]}},
            },
        }
        self._put("Job", namespace, job, "ADDED")

    def _jobset(self, namespace: str, jobset: dict[str, Any]) -> None:
        """The JobSet controller, reduced to: one Indexed Job per replicated
        job (replicas 1), pods labelled as JobSet labels them, and the JobSet
        done when every child is (failed when one fails)."""
        name = jobset["metadata"]["name"]
        ended = {"Completed", "Failed"}
        if any(c["type"] in ended for c in jobset.get("status", {}).get("conditions", [])):
            return  # a finished JobSet's children are left alone (the TTL may take them)
        suspend = bool(jobset["spec"].get("suspend"))
        children = []
        for replicated in jobset["spec"]["replicatedJobs"]:
            child_name = f"{name}-{replicated['name']}-0"
            child = self.store.get(("Job", namespace, child_name))
            if child is not None and bool(child["spec"].get("suspend")) != suspend:
                child["spec"]["suspend"] = suspend  # the JobSet controller passes it on
                self._bump("MODIFIED", "Job", namespace, child)
            if child is None:
                spec = copy.deepcopy(replicated["template"]["spec"])
                if suspend:
                    spec["suspend"] = True
                labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
                labels["jobset.sigs.k8s.io/jobset-name"] = name
                labels["jobset.sigs.k8s.io/replicatedjob-name"] = replicated["name"]
                job = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": child_name,
                        "namespace": namespace,
                        "uid": str(uuid.uuid4()),
                        "creationTimestamp": now(),
                        "ownerReferences": [self._owned(jobset)],
                        "labels": {"jobset.sigs.k8s.io/jobset-name": name},
                    },
                    "spec": spec,
                }
                self._put("Job", namespace, job, "ADDED")
                return
            children.append(
                {
                    c["type"]
                    for c in child.get("status", {}).get("conditions", [])
                    if c["status"] == "True"
                }
            )
        conditions = {c["type"] for c in jobset.get("status", {}).get("conditions", [])}
        if any("Failed" in done for done in children):
            outcome = ("Failed", "Failed")
        elif all("Complete" in done for done in children):
            outcome = ("Complete", "Completed")
        else:
            return
        theirs, ours = outcome
        if ours not in conditions:
            jobset.setdefault("status", {}).setdefault("conditions", []).append(
                {
                    "type": ours,
                    "status": "True",
                    "reason": theirs,
                    "message": theirs,
                    "lastTransitionTime": now(),
                }
            )
            self._bump("MODIFIED", "JobSet", namespace, jobset)

    def _job(self, namespace: str, job: dict[str, Any]) -> None:
        """The Job controller, for Indexed Jobs as fluxhop makes them
        (backoffLimit 0, podFailurePolicy Ignore on DisruptionTarget,
        successPolicy on index 0); one step of it per call."""
        name = job["metadata"]["name"]
        conditions = job.setdefault("status", {}).setdefault("conditions", [])
        true = {c["type"] for c in conditions if c["status"] == "True"}
        if true & {"Complete", "Failed"}:
            self._expire(namespace, job)
            return
        if true & {"SuccessCriteriaMet", "FailureTarget"}:
            # as the Job controller does: the terminal condition comes once
            # the pods it terminated (in the step that set the target) are gone
            self._stop_pods(namespace, name)
            if "SuccessCriteriaMet" in true:
                self._condition(namespace, job, "Complete", "True", *SUCCESS)
            else:
                self._condition(namespace, job, "Failed", "True", *BACKOFF)
            return
        if job["spec"].get("suspend"):
            # as the Job controller does: a suspended Job's pods are deleted
            # gracefully (not failures) and it says so in a Suspended condition
            self._stop_pods(namespace, name)
            self._condition(namespace, job, "Suspended", "True", "JobSuspended", "Job suspended")
            return
        if "Suspended" in true:  # resumed (Kueue's admission): pods again
            self._condition(namespace, job, "Suspended", "False", "JobResumed", "Job resumed")
        parallelism = job["spec"].get("parallelism", 1)
        completions = job["spec"].get("completions", parallelism)
        pods = {}
        for pod in self._pods_of(namespace, name):
            if disrupted(pod):
                continue  # podFailurePolicy Ignore: not a failure, replaced once gone
            if self._pod_index(pod) >= completions and pod["status"]["phase"] in ACTIVE:
                # a scale-down: as the Job controller does, it deletes the pods
                # whose index is out of range, gracefully, not as failures
                self._delete_pod(namespace, pod, counted=False)
                continue
            pods[self._pod_index(pod)] = pod
        for index in range(min(parallelism, completions)):
            if index not in pods:
                self._create_pod(namespace, job, index)
        failed = self.failures.setdefault(job["metadata"]["uid"], set())
        failed.update(
            p["metadata"]["uid"] for p in pods.values() if p["status"]["phase"] == "Failed"
        )
        lead = pods.get(0)
        if failed:  # backoffLimit 0 (fluxhop's): the first failure fails the Job
            self._finish(namespace, job, "FailureTarget", BACKOFF)
        elif lead is not None and lead["status"]["phase"] == "Succeeded":
            self._finish(namespace, job, "SuccessCriteriaMet", SUCCESS)

    def _finish(
        self, namespace: str, job: dict[str, Any], target: str, why: tuple[str, str]
    ) -> None:
        """The first of the Job controller's two steps to a terminal condition:
        SuccessCriteriaMet or FailureTarget, and its active pods terminated
        gracefully (a running container exits 143); Complete or Failed follows
        in the next step."""
        self._condition(namespace, job, target, "True", *why)
        self._stop_pods(namespace, job["metadata"]["name"])

    def _condition(
        self, namespace: str, job: dict[str, Any], kind: str, state: str, reason: str, message: str
    ) -> None:
        """Set a Job condition (in place when it is there), as the Job controller writes them."""
        conditions = job["status"].setdefault("conditions", [])
        found = next((c for c in conditions if c["type"] == kind), None)
        if found is not None and (found["status"], found.get("reason")) == (state, reason):
            return
        if found is None:
            found = {"type": kind}
            conditions.append(found)
        found.update(
            status=state,
            reason=reason,
            message=message,
            lastProbeTime=now(),
            lastTransitionTime=now(),
        )
        self._bump("MODIFIED", "Job", namespace, job)

    def _expire(self, namespace: str, job: dict[str, Any]) -> None:
        """The TTL controller, for ttlSecondsAfterFinished 0 (the only value
        modelled; the fake keeps no clock): a finished Job is deleted at once,
        with Foreground propagation - marked, its dependents (pods) gone
        first, then the Job."""
        if job["spec"].get("ttlSecondsAfterFinished") != 0:
            return
        meta = job["metadata"]
        meta["deletionTimestamp"] = now()
        meta["finalizers"] = ["foregroundDeletion"]
        self._bump("MODIFIED", "Job", namespace, job)
        self._remove("Job", namespace, meta["name"], foreground=True)

    def _pods_of(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        return [
            pod
            for (k, ns, _), pod in list(self.store.items())
            if k == "Pod"
            and ns == namespace
            and pod["metadata"]["labels"].get("batch.kubernetes.io/job-name") == job_name
        ]

    def _stop_pods(self, namespace: str, job_name: str) -> None:
        """The Job controller deletes the Job's active pods: gracefully (a
        running container gets SIGTERM and exits 143), not counted as failures."""
        for pod in self._pods_of(namespace, job_name):
            if pod["status"]["phase"] in ACTIVE:
                self._delete_pod(namespace, pod, counted=False)

    def _delete_pod(self, namespace: str, pod: dict[str, Any], *, counted: bool) -> None:
        """A graceful pod deletion as the API server and the kubelet carry it
        out: the pod is marked deleted; a running container gets SIGTERM and
        exits 143 (a MODIFIED event with the terminated status, phase
        Failed); a container that never started leaves the pod Failed; then
        the pod object goes (DELETED). ``counted``: the Job controller counts
        the failure (a pod someone else deleted; a disruption it ignores)."""
        meta = pod["metadata"]
        meta.setdefault("deletionTimestamp", now())
        meta.setdefault("deletionGracePeriodSeconds", 30)
        if pod["status"]["phase"] == "Running":
            self._terminate(namespace, pod, 143)
        elif pod["status"]["phase"] == "Pending":
            pod["status"]["phase"] = "Failed"
            self._bump("MODIFIED", "Pod", namespace, pod)
        if counted and pod["status"]["phase"] == "Failed" and not disrupted(pod):
            for owner in meta.get("ownerReferences") or []:
                if owner.get("kind") == "Job":
                    self.failures.setdefault(owner["uid"], set()).add(meta["uid"])
        self._remove("Pod", namespace, meta["name"])

    @staticmethod
    def _pod_index(pod: dict[str, Any]) -> int:
        return int(pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])

    def _create_pod(self, namespace: str, job: dict[str, Any], index: int) -> None:
        template = copy.deepcopy(job["spec"]["template"])
        labels = dict(template.get("metadata", {}).get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/job-name": job["metadata"]["name"],
                "job-name": job["metadata"]["name"],
                "batch.kubernetes.io/job-completion-index": str(index),
            }
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job['metadata']['name']}-{index}-{uuid.uuid4().hex[:5]}",
                "namespace": namespace,
                "labels": labels,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "ownerReferences": [self._owned(job)],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending", "conditions": []},
        }
        self._put("Pod", namespace, pod, "ADDED")

    def _event(self, namespace: str, pod: dict[str, Any], reason: str, message: str) -> None:
        name = f"{pod['metadata']['name']}.{reason.lower()}"
        if ("Event", namespace, name) in self.store:
            return
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "type": "Warning",
            "reason": reason,
            "message": message,
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "namespace": namespace,
            },
        }
        self._put("Event", namespace, event, "ADDED")

    def _volumes_ready(self, namespace: str, pod: dict[str, Any]) -> str | None:
        for volume in pod["spec"].get("volumes") or []:
            if (
                "configMap" in volume
                and ("ConfigMap", namespace, volume["configMap"]["name"]) not in self.store
            ):
                return f'configmap "{volume["configMap"]["name"]}" not found'
            if (
                "secret" in volume
                and ("Secret", namespace, volume["secret"]["secretName"]) not in self.store
            ):
                return f'secret "{volume["secret"]["secretName"]}" not found'
        return None

    @staticmethod
    def _interactive(pod: dict[str, Any]) -> bool:
        container = pod["spec"]["containers"][0]
        return container.get("command", [""])[-1].endswith("entrypoint.sh") and not container.get(
            "args"
        )

    def _lead_finished(self, namespace: str, pod: dict[str, Any]) -> bool:
        job = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        return any(
            p["status"]["phase"] in ("Succeeded", "Failed")
            for (k, ns, _), p in self.store.items()
            if k == "Pod"
            and ns == namespace
            and self._pod_index(p) == 0
            and not disrupted(p)
            and p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == job
        )

    def _kubelet(self, namespace: str, pod: dict[str, Any]) -> None:
        state = pod["status"]
        if state["phase"] in ("Succeeded", "Failed"):
            return
        if not any(
            c["type"] == "PodScheduled" and c["status"] == "True" for c in state["conditions"]
        ):
            if not self.schedulable:
                self._event(
                    namespace,
                    pod,
                    "FailedScheduling",
                    "0/3 nodes are available: 3 Insufficient cpu.",
                )
                return
            pod["spec"]["nodeName"] = "node-1"
            state["conditions"].append({"type": "PodScheduled", "status": "True"})
            self._bump("MODIFIED", "Pod", namespace, pod)
            return
        if state["phase"] == "Pending":
            missing = self._volumes_ready(namespace, pod)
            if missing:
                self._event(namespace, pod, "FailedMount", f"MountVolume.SetUp failed: {missing}")
                return
            state["phase"] = "Running"
            state["startTime"] = now()
            state["podIP"] = f"10.244.{next(self.rv) % 250}.{self._pod_index(pod) % 250 + 2}"
            name = pod["spec"]["containers"][0]["name"]
            state["containerStatuses"] = [
                {"name": name, "ready": True, "restartCount": 0, "image": pod["spec"]["containers"][0]
                 .get("image", ""), "imageID": "", "state": {"running": {"startedAt": now()}}}
            ]  # fmt: skip
            # rank 0 with the probe: once the instance is up; without one: now
            self._set_ready(pod, self._pod_index(pod) != 0 or not self._probed(pod))
            self._bump("MODIFIED", "Pod", namespace, pod)
            return
        index = self._pod_index(pod)
        if index in self.failing_ranks:  # its broker fails as it starts
            self._terminate(namespace, pod, self.failing_ranks[index])
            return
        if index == 0 and not self._instance_up(namespace, pod):
            return  # no quorum: no initial program yet
        if index != 0 and not self._lead_finished(namespace, pod):
            return  # workers finish when the lead does (the instance shuts down)
        if index == 0 and self._interactive(pod):
            return  # an interactive instance stays up until it is deleted
        outcome = self.runner(pod, index)
        if outcome is None:
            return  # still running (the runner may have written log lines)
        lines, code = outcome
        self.logs.setdefault((namespace, pod["metadata"]["name"]), []).extend(lines)
        self._terminate(namespace, pod, code)

    def _instance_up(self, namespace: str, pod: dict[str, Any]) -> bool:
        """Rank 0's readinessProbe: its instance is up once every pod of its
        Job runs (the quorum); then it is Ready. Never with pods_ready off.
        A pod without the probe (the Flux Operator's) is not held back."""
        if self._is_ready(pod) or not self._probed(pod):
            return True
        job_name = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        job = self.store.get(("Job", namespace, job_name))
        size = (job or {}).get("spec", {}).get("parallelism", 1)
        running = sum(
            1
            for (k, ns, _), p in self.store.items()
            if k == "Pod"
            and ns == namespace
            and p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == job_name
            and p["status"]["phase"] == "Running"
            and self._pod_index(p) not in self.failing_ranks  # never joins
        )
        if not self.pods_ready or running < size:
            return False
        self._set_ready(pod, True)
        self._bump("MODIFIED", "Pod", namespace, pod)
        return True

    @staticmethod
    def _probed(pod: dict[str, Any]) -> bool:
        return "readinessProbe" in pod["spec"]["containers"][0]

    @staticmethod
    def _is_ready(pod: dict[str, Any]) -> bool:
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"]
        )

    @staticmethod
    def _set_ready(pod: dict[str, Any], ready: bool) -> None:
        """The kubelet's Ready condition (its readinessProbe passing, or not)."""
        conditions = [c for c in pod["status"]["conditions"] if c["type"] != "Ready"]
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
        pod["status"]["conditions"] = conditions
        for status in pod["status"].get("containerStatuses", []):
            status["ready"] = ready

    def _terminate(self, namespace: str, pod: dict[str, Any], code: int) -> None:
        self._set_ready(pod, False)
        pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
        name = pod["spec"]["containers"][0]["name"]
        pod["status"]["containerStatuses"] = [
            {
                "name": name,
                "ready": False,
                "restartCount": 0,
                "image": pod["spec"]["containers"][0].get("image", ""),
                "imageID": "",
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                    }
                },
            }
        ]
        self._bump("MODIFIED", "Pod", namespace, pod)

    def evict(self, name: str, namespace: str = "default") -> None:
        """Evict a pod, as a node drain or ``kubectl evict`` does (the eviction API)."""
        with self.changed:
            self._evict(namespace, self.store[("Pod", namespace, name)])
            self.changed.notify_all()

    def _evict(self, namespace: str, pod: dict[str, Any]) -> None:
        """As the eviction API does: condition DisruptionTarget, then a graceful
        delete (its container gets SIGTERM and exits 143; then the pod goes).
        The Job's podFailurePolicy ignores it: the Job replaces the pod, once gone."""
        pod["status"]["conditions"].append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": now(),
            }
        )
        self._bump("MODIFIED", "Pod", namespace, pod)
        self._delete_pod(namespace, pod, counted=True)
