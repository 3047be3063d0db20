"""Failures only a real node produces, each said in one line by ``fluxhop
run`` (which rank, which pod, the node's words) with nothing left behind:
an image the registry does not have, a container killed for its memory, a
Secret that is not there, a root image under runAsNonRoot. ``status`` says
the same of a MiniCluster that stays."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.documents import minicluster_doc
from tests.realk8s.api import Api
from tests.realk8s.cluster import LocalCluster
from tests.realk8s.images.build import FLUX_IMAGE
from tests.realk8s.placing import ON_REAL_NODES, REAL_FLAGS
from tests.realk8s.test_run import leftovers
from tests.realk8s.tools import eventually, fluxhop

pytestmark = pytest.mark.usefixtures("real_nodes", "needs_flux")


def run(cluster: LocalCluster, namespace: str, *args: str):
    return fluxhop(cluster, "run", "--namespace", namespace, *REAL_FLAGS, *args, timeout=300)


def said(done: Any) -> str:
    """The one line fluxhop said on failure."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("fluxhop: ")]
    assert lines, done.stderr
    return lines[-1]


def file_of(tmp_path: Path, name: str, **spec: Any) -> str:
    path = tmp_path / f"{name}.yaml"
    document = minicluster_doc(name, size=1, flux={"container": {"disable": True}}, **spec)
    document["spec"]["pod"] = {**document["spec"].get("pod", {}), **ON_REAL_NODES}
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_an_image_the_registry_lacks(cluster: LocalCluster, admin: Api, namespace: str):
    done = run(cluster, namespace, "--name", "absent", "--flux-in-image",
               "--image", "ghcr.io/fluxhop-test/absent:1", "--", "true")  # fmt: skip
    assert done.returncode != 0
    line = said(done)
    assert re.search(r"rank 0 \(pod absent-0-\w+\), container absent: ", line), line
    assert "ImagePull" in line and "not found" in line, line  # the registry's words
    eventually("nothing left", lambda: leftovers(admin, namespace) == [], timeout=120)


def test_a_container_killed_for_its_memory(cluster: LocalCluster, admin: Api, namespace: str):
    hog = "python3 -c 'import time; a = bytearray(512 << 20); time.sleep(5)'"
    done = run(cluster, namespace, "--name", "hog", "--flux-in-image", "--image", FLUX_IMAGE,
               "--memory", "192Mi", "--", "sh", "-c", hog)  # fmt: skip
    assert done.returncode == 137, done.stderr
    line = said(done)
    assert re.match(r"fluxhop: rank 0 \(pod hog-0-\w+\), container hog: OOMKilled: exit 137", line)
    assert "(192Mi)" in line, line
    eventually("nothing left", lambda: leftovers(admin, namespace) == [], timeout=120)


@pytest.mark.parametrize(
    ("name", "container", "pod", "words"),
    [
        # a Secret the container's environment reads is not in the namespace
        ("secretive", {"secrets": {"TOKEN": {"name": "gone", "key": "k"}}}, {},
         'secret "gone" not found'),
        # runAsNonRoot without a user, and the image's user is root
        ("rooted", {}, {"securityContext": {"runAsNonRoot": True}},
         "runAsNonRoot and image will run as root"),
    ],
)  # fmt: skip
def test_a_container_the_node_cannot_make(
    cluster: LocalCluster, admin: Api, namespace: str, tmp_path: Path,
    name: str, container: dict[str, Any], pod: dict[str, Any], words: str,
):  # fmt: skip
    spec = file_of(tmp_path, name, pod=pod,
                   containers=[{"image": FLUX_IMAGE, "command": ["true"], **container}])  # fmt: skip
    done = fluxhop(cluster, "run", "--namespace", namespace, "-f", spec, timeout=300)
    assert done.returncode != 0
    line = said(done)
    where = rf"rank 0 \(pod {name}-0-\w+\), container {name}: CreateContainerConfigError: "
    assert re.search(where, line) and words in line, line
    eventually("nothing left", lambda: leftovers(admin, namespace) == [], timeout=120)


def test_get_and_status_name_the_stuck_pod(cluster: LocalCluster, admin: Api, namespace: str):
    done = fluxhop(cluster, "create", "--namespace", namespace, *REAL_FLAGS, "--name", "stays",
                   "--no-wait", "--flux-in-image", "--image", "ghcr.io/fluxhop-test/absent:2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    stuck = r"rank 0 \(pod stays-0-\w+\), container stays: \w*ImagePull"

    def problem() -> str | None:
        out = fluxhop(cluster, "get", "--namespace", namespace, "stays").stdout
        return next((line for line in out.splitlines() if line.startswith("stays: ")), None)

    line = eventually("get names the problem", problem, timeout=120)
    assert re.search(stuck, line), line
    status = fluxhop(cluster, "status", "--namespace", namespace, "stays")
    assert status.returncode != 0
    assert re.search(f"rank 0 is not running: {stuck}", said(status)), status.stderr
    fluxhop(cluster, "delete", "--namespace", namespace, "stays")
