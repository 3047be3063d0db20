"""The test kubelet under the real control plane: what the scheduler binds
runs as real processes, and what it reports is what kubectl and the
controllers read. Nothing here needs Flux."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path

from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.tools import eventually, kubectl, kubectl_tty, pod_manifest, wait_pod_phase


def pods(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def test_a_pod_runs_and_reports_as_a_kubelet_does(
    cluster: LocalCluster, admin: Api, namespace: str
):
    script = 'echo "out $(hostname)"; echo err >&2; printf "[%s]" "$@"; exit 4'
    admin.create(pods(namespace), pod_manifest("p", ["sh", "-c", script, "sh", "a  b", "&&"]))
    pod = wait_pod_phase(admin, namespace, "p", "Succeeded", "Failed")
    assert pod["status"]["phase"] == "Failed"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (4, "Error")
    assert pod["status"]["podIP"].startswith("198.19.")
    assert pod["spec"]["nodeName"] in {"node-a", "node-b"}  # the real scheduler bound it
    logs = kubectl(cluster, "logs", "-n", namespace, "p").stdout
    assert logs.splitlines() == ["out p", "err", "[a  b][&&]"]
    stamped = kubectl(cluster, "logs", "-n", namespace, "p", "--timestamps", "--tail=1").stdout
    assert stamped.endswith(" [a  b][&&]\n") and stamped[:4].isdigit()


def test_follow_streams_until_the_container_ends(cluster: LocalCluster, admin: Api, namespace: str):
    admin.create(
        pods(namespace),
        pod_manifest("f", ["sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.3; done"]),
    )
    wait_pod_phase(admin, namespace, "f", "Running", "Succeeded")
    follow = kubectl(cluster, "logs", "-f", "-n", namespace, "f", timeout=60)
    assert follow.stdout.split() == ["1", "2", "3"]


def test_exec_keeps_argv_stdin_and_the_exit_code(cluster: LocalCluster, admin: Api, namespace: str):
    admin.create(
        pods(namespace), pod_manifest("x", ["sleep", "600"], terminationGracePeriodSeconds=1)
    )
    wait_pod_phase(admin, namespace, "x", "Running")
    done = kubectl(cluster, "exec", "-n", namespace, "x", "--", "sh", "-c", 'printf "[%s]" "$@"; exit 9',
                   "sh", "a  b", "$(HOME)", check=False)  # fmt: skip
    assert (done.returncode, done.stdout) == (9, "[a  b][$(HOME)]")
    assert (
        kubectl(cluster, "exec", "-i", "-n", namespace, "x", "--", "cat", stdin="through\n").stdout
        == "through\n"
    )
    # the container's own PID namespace: its command is PID 1
    assert (
        kubectl(cluster, "exec", "-n", namespace, "x", "--", "cat", "/proc/1/cmdline").stdout
        == "sleep\x00600\x00"
    )
    script = "test -t 0 && test -t 1 && echo tty && read -r line && echo got $line"
    code, output = kubectl_tty(cluster, "exec", "-it", "-n", namespace, "x", "--", "sh", "-c", script,
                               answer=b"typed\r")  # fmt: skip
    assert code == 0 and "tty\r\n" in output and "got typed\r\n" in output, output


def test_restart_on_failure_counts_and_keeps_the_previous_log(
    cluster: LocalCluster, admin: Api, namespace: str
):
    marker = "/dev/shm/ran-once"  # the pod's /dev/shm outlives a container restart
    script = f"if [ -e {marker} ]; then echo second; exit 0; fi; touch {marker}; echo first; exit 2"
    admin.create(
        pods(namespace), pod_manifest("r", ["sh", "-c", script], restartPolicy="OnFailure")
    )
    pod = wait_pod_phase(admin, namespace, "r", "Succeeded", "Failed")
    status = pod["status"]["containerStatuses"][0]
    assert (pod["status"]["phase"], status["restartCount"]) == ("Succeeded", 1)
    assert status["lastState"]["terminated"]["exitCode"] == 2
    assert kubectl(cluster, "logs", "-n", namespace, "r").stdout == "second\n"
    assert kubectl(cluster, "logs", "-n", namespace, "r", "--previous").stdout == "first\n"


def test_deletion_sends_sigterm_then_ends_the_pod(
    cluster: LocalCluster, admin: Api, namespace: str
):
    """SIGTERM reaches the container (its trap exits 0: not 137, which SIGKILL
    at the end of the grace period would give), the terminal status is
    written, then the pod is gone and so are the kubelet's files of it."""
    script = "trap 'exit 0' TERM; echo up; while :; do sleep 0.1; done"
    admin.create(
        pods(namespace), pod_manifest("d", ["sh", "-c", script], terminationGracePeriodSeconds=30)
    )
    wait_pod_phase(admin, namespace, "d", "Running")
    eventually(
        "the trap set", lambda: "up" in kubectl(cluster, "logs", "-n", namespace, "d").stdout
    )
    version = admin.get(f"{pods(namespace)}/d")["metadata"]["resourceVersion"]
    admin.delete(f"{pods(namespace)}/d")
    last = None
    for kind, pod in admin.watch(
        pods(namespace), version, fieldSelector="metadata.name=d", timeout=60
    ):
        last = pod
        if kind == "DELETED":
            break
    assert last is not None and last["status"]["phase"] == "Succeeded"  # all containers exited 0
    assert last["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    files = cluster.workdir / "nodes"
    eventually(
        "the kubelet's files of the pod gone", lambda: not list(files.glob(f"*/pods/{namespace}_d"))
    )


def test_volumes_as_the_kubelet_mounts_them(cluster: LocalCluster, admin: Api, namespace: str):
    admin.create(f"/api/v1/namespaces/{namespace}/configmaps",
                 {"metadata": {"name": "cm"}, "data": {"a": "A", "b": "B"}})  # fmt: skip
    admin.create(f"/api/v1/namespaces/{namespace}/secrets",
                 {"metadata": {"name": "s"}, "data": {"k": base64.b64encode(b"K").decode()}})  # fmt: skip
    script = (
        "stat -c '%a' /cm/x/a; cat /cm/x/a; echo; stat -L -c '%a %g' /s/k; cat /s/k; echo; "
        "grep app= /info/labels; id -u; id -G; df -t tmpfs /mem >/dev/null && echo tmpfs; "
        "ls /cm; cat /token/ns"
    )
    volumes = [
        {"name": "cm", "configMap": {"name": "cm", "items": [{"key": "a", "path": "x/a", "mode": 0o440}]}},
        {"name": "s", "secret": {"secretName": "s", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"name": "mem", "emptyDir": {"medium": "Memory"}},
        {"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "jwt", "expirationSeconds": 3600}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
    ]  # fmt: skip
    mounts = [{"name": v["name"], "mountPath": f"/{v['name']}"} for v in volumes]
    manifest = pod_manifest(
        "v", ["sh", "-c", script], volumes=volumes, metadata={"labels": {"app": "v"}},
        securityContext={"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
        container={"volumeMounts": mounts},
    )  # fmt: skip
    admin.create(pods(namespace), manifest)
    pod = wait_pod_phase(admin, namespace, "v", "Succeeded", "Failed")
    logs = kubectl(cluster, "logs", "-n", namespace, "v").stdout.splitlines()
    assert pod["status"]["phase"] == "Succeeded", logs
    assert logs == [
        "440",
        "A",
        "440 2000",
        "K",
        'app="v"',
        "1000",
        "1000 2000",
        "tmpfs",
        "x",
        namespace,
    ]


def test_token_in_a_projected_volume_is_the_api_servers(
    cluster: LocalCluster, admin: Api, namespace: str
):
    manifest = pod_manifest("t", ["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"],
                            automountServiceAccountToken=True)  # fmt: skip
    admin.create(pods(namespace), manifest)
    wait_pod_phase(admin, namespace, "t", "Succeeded")
    token = kubectl(cluster, "logs", "-n", namespace, "t").stdout.strip()
    review = admin.create("/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token}})
    assert review["status"]["authenticated"]
    assert review["status"]["user"]["username"] == f"system:serviceaccount:{namespace}:default"


def test_cluster_dns_answers_for_a_headless_service(
    cluster: LocalCluster, admin: Api, namespace: str
):
    admin.create(f"/api/v1/namespaces/{namespace}/services", {
        "metadata": {"name": "peers"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"app": "dns"},
                 "ports": [{"name": "p", "port": 1}]},
    })  # fmt: skip
    lookup = "until getent hosts one.peers >/dev/null; do sleep 0.2; done; getent hosts one.peers; hostname -f"
    for name, command in (("one", ["sleep", "600"]), ("two", ["sh", "-c", lookup])):
        admin.create(
            pods(namespace),
            pod_manifest(
                name,
                command,
                hostname=name,
                subdomain="peers",
                metadata={"labels": {"app": "dns"}},
            ),
        )
    pod_one = wait_pod_phase(admin, namespace, "one", "Running", "Succeeded")
    wait_pod_phase(admin, namespace, "two", "Succeeded", timeout=60)
    answer, fqdn = kubectl(cluster, "logs", "-n", namespace, "two").stdout.splitlines()
    assert answer.split()[0] == pod_one["status"]["podIP"]
    assert answer.split()[1] == f"one.peers.{namespace}.svc.cluster.local"
    assert fqdn == f"two.peers.{namespace}.svc.cluster.local"


def test_node_reports_capacity_labels_and_renews_its_lease(cluster: LocalCluster, admin: Api):
    node = admin.get("/api/v1/nodes/node-a")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "2"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "node-a"
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-a"
    first = admin.get(path)["spec"]["renewTime"]
    eventually("a lease renewal", lambda: admin.get(path)["spec"]["renewTime"] != first, timeout=30)


def test_a_kubelet_may_not_touch_another_nodes_pods(
    cluster: LocalCluster, admin: Api, namespace: str
):
    """The Node authorizer and NodeRestriction judge the kubelet: node-a's
    credentials cannot read node-b's pods' secrets or label itself freely."""
    admin.create(f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "private"}})
    pair = cluster.ca.issue("kubelet-node-a", "system:node:node-a", groups=("system:nodes",))
    with Api(cluster.credentials(pair)) as node_a:
        try:
            node_a.get(f"/api/v1/namespaces/{namespace}/secrets/private")
        except Exception as error:
            assert getattr(error, "status", None) == 403, error
        else:
            raise AssertionError("node-a read a secret no pod of its uses")


def test_job_controller_counts_what_the_kubelet_reports(
    cluster: LocalCluster, admin: Api, namespace: str
):
    """Indexes 0 and 1 succeed; index 2 fails once the Job counts both (it
    waits for the test's mark: otherwise, on a busy machine, it can fail
    first, and the Job controller then ends the others as failed)."""
    mark = Path("/run") / f"fluxhop-job-{uuid.uuid4().hex[:8]}"  # the host is every pod's image
    script = (
        f"[ $JOB_COMPLETION_INDEX != 2 ] || {{ until [ -e {mark} ]; do sleep 0.1; done; exit 1; }}"
    )
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimit": 0,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [
                     {"name": "c", "image": "host", "command": ["sh", "-c", script]}]}}},
    }  # fmt: skip
    admin.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs/j"

    def finished() -> dict | None:
        conditions = admin.get(path).get("status", {}).get("conditions") or []
        return next(
            (
                c
                for c in conditions
                if c["type"] in ("Complete", "Failed") and c["status"] == "True"
            ),
            None,
        )

    try:
        eventually(
            "indexes 0 and 1 counted", lambda: admin.get(path)["status"].get("succeeded") == 2
        )
        mark.touch()
        condition = eventually("the Job finished", finished)
    finally:
        mark.unlink(missing_ok=True)
    assert condition["type"] == "Failed" and condition["reason"] == "BackoffLimitExceeded"
    status = admin.get(path)["status"]
    assert (status.get("succeeded"), status.get("failed"), status.get("completedIndexes")) == (
        2,
        1,
        "0,1",
    )


def test_kubectl_exec_is_denied_without_rbac(cluster: LocalCluster, admin: Api, namespace: str):
    admin.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "nobody"}}
    )
    token = cluster.token(namespace, "nobody")
    config = cluster.kubeconfig("nobody", token=token)
    done = subprocess.run([str(cluster.bin / "kubectl"), "--kubeconfig", str(config), "get", "pods", "-n", namespace],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert (
        f'User "system:serviceaccount:{namespace}:nobody" cannot list resource "pods"'
        in done.stderr
    )
    assert json.loads(kubectl(cluster, "auth", "whoami", "-o", "json").stdout)["status"]["userInfo"][
        "username"] == "fluxhop-admin"  # fmt: skip


def test_init_containers_run_in_order_before_the_containers(
    cluster: LocalCluster, admin: Api, namespace: str
):
    shared = {"name": "shared", "emptyDir": {}}
    mount = [{"name": "shared", "mountPath": "/shared"}]
    manifest = pod_manifest(
        "ordered", ["cat", "/shared/order"], volumes=[shared],
        initContainers=[
            {"name": f"init-{n}", "image": "host", "command": ["sh", "-c", f"echo {n} >> /shared/order"],
             "volumeMounts": mount} for n in (1, 2)
        ],
        container={"volumeMounts": mount},
    )  # fmt: skip
    admin.create(pods(namespace), manifest)
    pod = wait_pod_phase(admin, namespace, "ordered", "Succeeded", "Failed")
    assert pod["status"]["phase"] == "Succeeded"
    assert [s["state"]["terminated"]["reason"] for s in pod["status"]["initContainerStatuses"]] == [
        "Completed",
        "Completed",
    ]
    assert kubectl(cluster, "logs", "-n", namespace, "ordered").stdout == "1\n2\n"
    failing = pod_manifest("stopped", ["echo", "never"], initContainers=[
        {"name": "init", "image": "host", "command": ["sh", "-c", "exit 7"]}])  # fmt: skip
    admin.create(pods(namespace), failing)
    pod = wait_pod_phase(admin, namespace, "stopped", "Failed")
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
    assert "waiting" in pod["status"]["containerStatuses"][0]["state"]  # never started
