"""``fluxhop run`` and ``Client`` on the real cluster, with real Flux in the
pods (on the real nodes, from an image with Flux, where the cluster has them): rank 0's output and exit code come back, argv arrives word for word,
and nothing is left behind, also after Ctrl-C (the garbage collector removes
the children once fluxhop deletes the root)."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from fluxhop import Client
from fluxhop.spec import MiniCluster
from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.placing import flux_image, flux_image_flags
from tests.realk8s.tools import FLUXHOP, command_env, eventually, fluxhop, output

pytestmark = pytest.mark.usefixtures("needs_flux")


def run(
    cluster: LocalCluster, namespace: str, *args: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return fluxhop(cluster, "run", "--namespace", namespace, *flux_image_flags(cluster), *args,
                   timeout=timeout)  # fmt: skip


def leftovers(admin: Api, namespace: str) -> list[str]:
    """Every object fluxhop or its children could have left in ``namespace``."""
    found = []
    for path in ("/apis/batch/v1/namespaces/{}/jobs", "/api/v1/namespaces/{}/pods",
                 "/api/v1/namespaces/{}/services", "/api/v1/namespaces/{}/secrets",
                 "/api/v1/namespaces/{}/configmaps",
                 "/api/v1/namespaces/{}/persistentvolumeclaims",
                 "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies"):  # fmt: skip
        for obj in admin.get(path.format(namespace))["items"]:
            if obj["metadata"]["name"] != "kube-root-ca.crt":
                found.append(f"{path.split('/')[-1]}/{obj['metadata']['name']}")
    return found


@pytest.mark.parametrize("target", [None, "job"])
def test_four_ranks_print_four_host_names(
    cluster: LocalCluster, admin: Api, namespace: str, target: str | None
):
    extra = ["--target", target] if target else []
    done = run(cluster, namespace, "-N", "4", "--name", "four", *extra, "--", "hostname")
    assert done.returncode == 0, done.stderr
    assert sorted(output(done.stdout)) == ["four-0", "four-1", "four-2", "four-3"]
    # the brokers' log lines come along; none is a warning or worse (Fluxion's
    # start-up once warned here, in every MiniCluster)
    said = (done.stdout + done.stderr).splitlines()
    assert [line for line in said if re.match(r"<[0-4]>", line)] == [], done.stdout
    eventually("the MiniCluster's objects gone", lambda: leftovers(admin, namespace) == [])


def test_the_exit_code_is_rank_zeros(cluster: LocalCluster, namespace: str):
    done = run(cluster, namespace, "-N", "2", "--", "sh", "-c", "exit 3")
    assert done.returncode == 3, done.stderr


def test_argv_arrives_word_for_word(cluster: LocalCluster, namespace: str):
    argv = ["printf", "[%s]\\n", "a  b", "&&", "$(HOME)", "*", "it's"]
    done = run(cluster, namespace, "-N", "1", "--", *argv)
    assert done.returncode == 0, done.stderr
    assert output(done.stdout) == ["[a  b]", "[&&]", "[$(HOME)]", "[*]", "[it's]"]


def test_ctrl_c_leaves_nothing_behind(cluster: LocalCluster, admin: Api, namespace: str):
    process = subprocess.Popen(
        [str(FLUXHOP), "run", "--namespace", namespace, *flux_image_flags(cluster),
         "-N", "2", "--name", "stopped", "--", "sleep", "600"],
        env=command_env(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    pods = f"/api/v1/namespaces/{namespace}/pods"
    eventually("both pods running", lambda: sum(
        p["status"].get("phase") == "Running" for p in admin.get(pods)["items"]) == 2, timeout=120)  # fmt: skip
    owned = admin.get(f"/api/v1/namespaces/{namespace}/configmaps/stopped-flux-config")["metadata"]
    assert [o["kind"] for o in owned["ownerReferences"]] == [
        "Job"
    ]  # the GC's to remove, not fluxhop's
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    eventually("everything gone", lambda: leftovers(admin, namespace) == [], timeout=120)


def test_the_python_client_runs_and_cleans_up(cluster: LocalCluster, admin: Api, namespace: str):
    image, placed = flux_image(cluster)
    spec = MiniCluster.from_dict(minicluster_doc(
        "client", size=2, logging={"quiet": True}, flux={"container": {"disable": True}},
        pod=placed,
        containers=[{"image": image, "command": ["sh", "-c", "echo from-$(hostname); exit 5"]}]))  # fmt: skip
    with Client(namespace=namespace, kubeconfig=str(cluster.admin_kubeconfig)) as client:
        name = client.create(spec)
        status = client.wait(name, timeout=180)
        assert status.exit_code == 5
        assert "from-client-0" in "".join(client.logs(name))
        client.delete(name)
    eventually("everything gone", lambda: leftovers(admin, namespace) == [], timeout=120)
