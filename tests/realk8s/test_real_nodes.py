"""Pods on the real nodes (tests/realk8s/node): a kubelet of the release,
containerd and runc, images pulled from the cluster's registry. What a
stand-in cannot show: the container's cgroup holds the memory limit the pod
asked for, its root filesystem is the image's, it runs as the pod's user
without capabilities under seccomp, and ClusterIPs route (kube-proxy). Then
fluxhop's own pods, restricted, with the Flux view from its image."""

from __future__ import annotations

from typing import Any

import pytest

from tests.realk8s.api import Api
from tests.realk8s.cluster import RUN_DIR, LocalCluster
from tests.realk8s.placing import ON_REAL_NODES, REAL_FLAGS
from tests.realk8s.tools import eventually, fluxhop, output, pod_manifest, wait_pod_phase

IMAGE = "ubuntu:noble"  # Debian 12 with Flux's runtime, as the images build makes it
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def logs(api: Api, namespace: str, pod: str) -> str:
    return api.text(f"/api/v1/namespaces/{namespace}/pods/{pod}/log")


def run_pod(api: Api, namespace: str, name: str, script: str, **container: Any) -> str:
    """Run ``script`` in a pod on a real node; its output once it succeeded."""
    manifest = pod_manifest(
        name, ["sh", "-c", script], container={"image": IMAGE, **container}, **ON_REAL_NODES
    )
    api.create(f"/api/v1/namespaces/{namespace}/pods", manifest)
    pod = wait_pod_phase(api, namespace, name, "Succeeded", "Failed", timeout=180)
    said = logs(api, namespace, name)
    assert pod["status"]["phase"] == "Succeeded", said
    return said


def test_a_pod_runs_in_a_container_of_its_image_under_its_limits(
    cluster: LocalCluster, admin: Api, namespace: str, real_nodes: list[str]
):
    host_only = RUN_DIR / "cluster"  # on this machine, in no image
    script = (
        "id -u; grep -E '^(CapEff|Seccomp|NoNewPrivs):' /proc/self/status;"
        " cat /sys/fs/cgroup/memory/memory.limit_in_bytes;"
        f" test -e {host_only} && echo host-file || echo no-host-file;"
        " . /etc/os-release; echo $ID"
    )
    said = run_pod(
        admin, namespace, "contained", script,
        securityContext=RESTRICTED, resources={"limits": {"memory": "64Mi", "cpu": "500m"}},
    )  # fmt: skip
    lines = [line.split(":")[-1].strip() for line in output(said)]
    assert lines == ["1000", "0000000000000000", "1", "2", "67108864", "no-host-file", "debian"]
    pod = admin.get(f"/api/v1/namespaces/{namespace}/pods/contained")
    assert pod["spec"]["nodeName"] in real_nodes
    status = pod["status"]["containerStatuses"][0]
    assert status["imageID"].startswith("docker.io/library/ubuntu@sha256:")  # pulled by digest


def test_an_image_forgotten_by_every_node_is_pulled_again(
    cluster: LocalCluster, admin: Api, namespace: str, real_nodes: list[str]
):
    """Cold caches, as the benchmarks make them: each real node's containerd
    drops the image, and the next pod pulls it from the registry (the
    kubelet's Pulled event says it pulled, not that it was present)."""
    reference = "docker.io/library/ubuntu:noble"
    run_pod(admin, namespace, "warm", "true")  # at least one node has it
    forgotten = cluster.forget_images([reference])
    assert any(forgotten.values()), forgotten
    assert all(reference not in cluster.real_nodes[n].images() for n in real_nodes)
    run_pod(admin, namespace, "cold", "true")

    def pulled() -> str | None:
        events = admin.get(f"/api/v1/namespaces/{namespace}/events")["items"]
        said = [e["message"] for e in events if e["involvedObject"].get("name") == "cold"
                and e.get("reason") == "Pulled"]  # fmt: skip
        return said[0] if said else None

    message = eventually("the cold pod's Pulled event", pulled, 60)
    assert message.startswith("Successfully pulled image"), message


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    admin: Api, namespace: str, real_nodes: list[str]
):
    """The ClusterIP routes (kube-proxy on the node) and the name resolves
    (the cluster DNS): what fluxhop's operator does from its pod."""
    script = (
        'python3 -c "import json, ssl, urllib.request;'
        " sa = '/var/run/secrets/kubernetes.io/serviceaccount';"
        " context = ssl.create_default_context(cafile=sa + '/ca.crt');"
        " request = urllib.request.Request('https://kubernetes.default.svc/version',"
        " headers={'Authorization': 'Bearer ' + open(sa + '/token').read()});"
        " print(json.load(urllib.request.urlopen(request, context=context))['gitVersion'])\""
    )
    said = run_pod(admin, namespace, "client", script, securityContext=RESTRICTED)
    assert output(said) == ["v1.36.3"]


# each task: where it runs, as whom, the view's mounts and their options
# (mountinfo's mount point and options), and whether /opt/software takes a write
MOUNTS = (
    "hostname; id -u; "
    'awk \'$5 == "/opt/software" || $5 == "/mnt/flux/view" {split($6, o, ","); print $5, o[1]}\' '
    "/proc/self/mountinfo; touch /opt/software/x 2>/dev/null && echo wrote || echo read-only"
)


@pytest.mark.usefixtures("needs_flux")
@pytest.mark.parametrize("volume", ["image", "copy"])
def test_fluxhop_runs_restricted_with_the_flux_view_from_its_image(
    cluster: LocalCluster, admin: Api, namespace: str, real_nodes: list[str], volume: str
):
    """Non-root, no capabilities, seccomp: two brokers across the real nodes,
    rank 0's exit code. The view mounted from its image (an image volume:
    the view and its tree read-only, no init container) or copied by the
    init container into an emptyDir; either way never copied in the
    container, and nothing is written under the mount."""
    done = fluxhop(
        cluster, "run", "--namespace", namespace, "--image", IMAGE, "--security", "restricted",
        "--view-volume", volume, *REAL_FLAGS, "-N", "2", "--name", "real",
        "--", "sh", "-c", MOUNTS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = output(done.stdout)
    mounts = (
        ["/mnt/flux/view ro", "/opt/software ro"] if volume == "image" else ["/opt/software ro"]
    )
    expected = ["real-0", "real-1", *(["1000", "read-only", *mounts] * 2)]
    assert sorted(said) == sorted(expected), said
    failed = fluxhop(
        cluster, "run", "--namespace", namespace, "--image", IMAGE, "--security", "restricted",
        *REAL_FLAGS, "-N", "2", "--name", "exits", "--", "sh", "-c", "exit 3",
    )  # fmt: skip
    assert failed.returncode == 3, failed.stderr
    pods = f"/api/v1/namespaces/{namespace}/pods"
    eventually("the pods gone", lambda: admin.get(pods)["items"] == [], timeout=120)


@pytest.mark.usefixtures("needs_flux")
def test_a_view_image_without_flux_is_one_line_and_nothing_is_left(
    cluster: LocalCluster, admin: Api, namespace: str, real_nodes: list[str]
):
    """Mounted, a view image that holds no view (here the application
    image itself): the runtime cannot mount its subPath, and run says so in
    one line naming flux.container.image, then deletes what it made."""
    done = fluxhop(
        cluster, "run", "--namespace", namespace, "--image", IMAGE, "--view-image", IMAGE,
        "--view-volume", "image", *REAL_FLAGS, "-N", "2", "--name", "noview", "--", "true",
    )  # fmt: skip
    assert done.returncode != 0
    *progress, line = done.stderr.strip().splitlines()  # the pods as they came, then why not
    assert all(said.startswith("fluxhop: noview: ") for said in progress), done.stderr
    assert "CreateContainerError" in line and "opt/views/view" in line, line
    assert line.endswith("set flux.container.image to a Flux view image (a Spack view at "
                         "/opt/views/view, its tree at /opt/software)"), line  # fmt: skip
    pods = f"/api/v1/namespaces/{namespace}/pods"
    eventually("the pods gone", lambda: admin.get(pods)["items"] == [], timeout=120)
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    assert admin.get(jobs)["items"] == []
