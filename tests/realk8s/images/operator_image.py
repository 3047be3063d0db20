"""fluxhop operator's image, built from the project's own ``Dockerfile`` by
buildah (no daemon; RUN steps in a chroot), pulled from and pushed to the
images' registry under the name ``deploy/deployment.yaml`` runs.

* Its base, the Dockerfile's ``FROM`` (``python:3.12-slim``), is built by
  the images' build (build.py ``PYTHON_IMAGE``: Debian 12, its Python and
  pip) and pulled by buildah from the images' registry, as the nodes pull.
* The Dockerfile's ``pip install`` runs unchanged. The packages it fetches
  come from wheels this machine's pip fetched beforehand (its index is this
  machine's: never written here), mounted into the build with a pip.conf
  naming them, as a site's own package mirror would be.
* It is rebuilt when what it packs changes (the Dockerfile, pyproject.toml,
  README.md, ``src/``): its stamp in the images' directory holds their
  digest, so a change of fluxhop rebuilds this image only (about 45 s).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import yaml

from tests.conformance import REPO
from tests.realk8s.images.registry import Registry, repository_name
from tests.realk8s.ports import free_port

__all__ = [
    "BASE_IMAGE", "OPERATOR_IMAGE", "build_operator_image", "deployed_template",
    "operator_image_current",
]  # fmt: skip

DOCKERFILE = REPO / "Dockerfile"
STAMP = ".operator-built"


def _from_dockerfile() -> str:
    """The Dockerfile's base image (its one FROM)."""
    (line,) = [x for x in DOCKERFILE.read_text().splitlines() if x.upper().startswith("FROM ")]
    return line.split()[1]


def deployed_template() -> dict[str, Any]:
    """deploy/'s Deployment's pod template (a fresh copy)."""
    deployment = yaml.safe_load((REPO / "deploy" / "deployment.yaml").read_text())
    return dict(deployment["spec"]["template"])


def _deployed_image() -> str:
    """The image deploy/'s Deployment runs."""
    (container,) = deployed_template()["spec"]["containers"]
    return str(container["image"])


BASE_IMAGE = _from_dockerfile()
OPERATOR_IMAGE = _deployed_image()


def inputs_digest() -> str:
    """The digest of what the image packs."""
    digest = hashlib.sha256()
    files = [DOCKERFILE, REPO / "pyproject.toml", REPO / "README.md", Path(__file__)]
    files += sorted(p for p in (REPO / "src").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p))  # fmt: skip
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def operator_image_current(images: Path) -> bool:
    stamp = images / STAMP
    return stamp.is_file() and stamp.read_text().strip() == inputs_digest()


def _requirements() -> list[str]:
    """What ``pip install '.[operator]'`` needs: fluxhop's dependencies, its
    operator extra's, and its build system's."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    return [*project["build-system"]["requires"], *project["project"]["dependencies"],
            *project["project"]["optional-dependencies"]["operator"]]  # fmt: skip


def _buildah(root: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(["buildah", "--root", str(root / "storage"), "--runroot", str(root / "run"),
                    "--storage-driver", "vfs", *args], check=True, env=env)  # fmt: skip


def build_operator_image(images: Path, registry_binary: Path) -> None:
    """Build the image into the registry storage of ``images`` and stamp it."""
    scratch = Path(tempfile.mkdtemp(prefix=".operator-", dir=images.parent))
    registry = Registry(registry_binary, images / "registry", f"127.0.0.1:{free_port()}",
                        scratch / "registry-run").start()  # fmt: skip
    try:
        started = time.monotonic()
        wheels = scratch / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "-w", str(wheels),
                        *_requirements()], check=True)  # fmt: skip
        pip_conf = scratch / "pip.conf"
        pip_conf.write_text(
            "[global]\nno-index = true\nfind-links = /wheels\nroot-user-action = ignore\n"
        )
        address = registry.url.removeprefix("http://")
        host = repository_name(BASE_IMAGE).partition("/")[0]
        registries = scratch / "registries.conf"
        registries.write_text(
            f'unqualified-search-registries = ["docker.io"]\n[[registry]]\nprefix = "{host}"\n'
            f'location = "{address}/{host}"\ninsecure = true\n'
        )
        env = {**os.environ, "CONTAINERS_REGISTRIES_CONF": str(registries)}
        _buildah(scratch, "bud", "--quiet", "--isolation", "chroot", "--network", "host",
                 "--pull-always", "--volume", f"{wheels}:/wheels:ro",
                 "--volume", f"{pip_conf}:/etc/pip.conf:ro", "--tag", OPERATOR_IMAGE,
                 "--file", str(DOCKERFILE), str(REPO), env=env)  # fmt: skip
        target = f"docker://{address}/{repository_name(OPERATOR_IMAGE)}"
        _buildah(scratch, "push", "--quiet", "--tls-verify=false", OPERATOR_IMAGE, target, env=env)
        (images / STAMP).write_text(inputs_digest() + "\n")
        print(f"the operator's image from the Dockerfile in {time.monotonic() - started:.0f} s",
              flush=True)  # fmt: skip
    finally:
        registry.stop()
        shutil.rmtree(scratch, ignore_errors=True)
