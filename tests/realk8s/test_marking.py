"""The tools of the scale benchmark (bench/bench_operator_scale.py) under the
real control plane: kwok's node, whose pods read as running while nothing
runs (kwok.py), and the API server's audit log, read back by
tests/realk8s/audit.py. Nothing here needs Flux."""

from __future__ import annotations

import ipaddress
import json
import time
import uuid

from tests.realk8s import audit
from tests.realk8s.api import Api, ApiError, Credentials
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.conftest import AUDITED_NAMESPACE, MARKED
from tests.realk8s.kwok import POD_CIDR
from tests.realk8s.tools import eventually, pod_manifest, wait_pod_phase

TOLERATE = [{"key": MARKED, "operator": "Exists", "effect": "NoSchedule"}]


def test_a_marked_pod_runs_nothing_yet_reads_as_running_and_goes_at_once(
    cluster: LocalCluster, admin: Api, namespace: str
):
    pods = f"/api/v1/namespaces/{namespace}/pods"
    manifest = pod_manifest(
        "m",
        ["sh", "-c", f"touch {cluster.workdir}/marked-ran; sleep 600"],
        initContainers=[{"name": "i", "image": "host", "command": ["false"]}],
        nodeSelector={"kubernetes.io/hostname": "node-m"},
        tolerations=TOLERATE,
        terminationGracePeriodSeconds=600,
    )
    admin.create(pods, manifest)
    pod = wait_pod_phase(admin, namespace, "m", "Running", "Failed", "Succeeded")
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "node-m"
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["reason"] == "Completed"  # `false` never ran
    (main,) = pod["status"]["containerStatuses"]
    assert "running" in main["state"] and main["ready"]
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(POD_CIDR)
    assert not (cluster.workdir / "marked-ran").exists()
    admin.delete(f"{pods}/m")  # a grace period of 600 s, yet gone at once: nothing to stop
    eventually("the pod gone", lambda: not _exists(admin, f"{pods}/m"), timeout=30)


def _exists(api: Api, path: str) -> bool:
    try:
        api.get(path)
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


def test_the_audit_log_counts_the_requests_of_the_audited_users_only(
    cluster: LocalCluster, admin: Api
):
    account = f"a-{uuid.uuid4().hex[:6]}"
    try:
        admin.create("/api/v1/namespaces", {"metadata": {"name": AUDITED_NAMESPACE}})
    except ApiError as error:
        if error.status != 409:  # made by an earlier test of this cluster: kept
            raise
    namespace_path = f"/api/v1/namespaces/{AUDITED_NAMESPACE}"
    admin.create(f"{namespace_path}/serviceaccounts", {"metadata": {"name": account}})
    try:
        token = cluster.token(AUDITED_NAMESPACE, account)
        since = time.time() - 1
        counted = Credentials(admin.credentials.server, admin.credentials.ca, token=token)
        with Api(counted) as api:
            for _ in range(3):  # refused (no role): counted all the same, with their code
                try:
                    api.get(f"{namespace_path}/configmaps/absent")
                except ApiError as error:
                    assert error.status == 403
            try:
                api.get(f"{namespace_path}/configmaps")
            except ApiError as error:
                assert error.status == 403
        admin.get(f"{namespace_path}/configmaps")  # the admin's: not audited
        user = f"system:serviceaccount:{AUDITED_NAMESPACE}:{account}"
        found = eventually(
            "the audit log has the four requests",
            lambda: (got := audit.requests(cluster.audit_log, user)) and len(got) >= 4 and got,
        )
        assert audit.count(found, since, time.time() + 1) == {
            "get configmaps": 3,
            "list configmaps": 1,
        }
        assert {r.code for r in found} == {403} and {r.namespace for r in found} == {
            AUDITED_NAMESPACE
        }
        admins = {r.user for r in audit.requests(cluster.audit_log)}
        assert admins and all(
            u.startswith("system:serviceaccount:" + AUDITED_NAMESPACE) for u in admins
        )
    finally:
        admin.delete(f"{namespace_path}/serviceaccounts/{account}")


def test_a_stream_counts_once_at_its_start(tmp_path):
    """A watch is logged at ResponseStarted and again at ResponseComplete:
    one request. Pure: a log written here."""

    def line(audit_id: str, stage: str, verb: str, at: str) -> str:
        return json.dumps({
            "auditID": audit_id, "stage": stage, "verb": verb,
            "user": {"username": "u"}, "requestReceivedTimestamp": at,
            "objectRef": {"resource": "pods", "subresource": "status", "namespace": "n"},
            "responseStatus": {"code": 200},
        })  # fmt: skip

    log = tmp_path / "audit.log"
    log.write_text("\n".join([
        line("w", "ResponseStarted", "watch", "2026-12-03T00:00:00.000000Z"),
        line("p", "ResponseComplete", "patch", "2026-12-03T00:00:01.500000Z"),
        line("w", "ResponseComplete", "watch", "2026-12-03T00:00:00.000000Z"),
        line("q", "ResponseComplete", "patch", "2026-12-03T00:00:09.000000Z"),
    ]) + "\n")  # fmt: skip
    found = audit.requests(log, "u")
    assert [r.verb for r in found] == ["watch", "patch", "patch"]
    start = found[0].received
    assert audit.count(found, start, start + 2) == {"watch pods/status": 1, "patch pods/status": 1}
    assert audit.requests(log, "someone else") == []
