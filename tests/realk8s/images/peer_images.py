"""The peers' images: a peer built from ``../shared/upstream/`` (tests/peers)
on Debian 12 minbase with the libraries its cgo links, under the name
upstream ships it as, run by the non-root user kubebuilder's images run as
(65532, distroless's ``nonroot``; upstream's manager.yaml asks
``runAsNonRoot``), pushed into the images' registry storage.

Rebuilt alone when a peer's build changes: the stamp holds the peers'
build directories (each named by a digest of its source, the Go version
and the recipe) and this recipe's digest.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.peers import FLUX_OPERATOR, Peer
from tests.realk8s.images.debian import debian_layer
from tests.realk8s.images.oci import Blobs, Image, push
from tests.realk8s.images.registry import Registry, repository_name
from tests.realk8s.ports import free_port

__all__ = ["FLUX_OPERATOR_IMAGE", "PEER_IMAGES", "build_peer_images", "peer_images_current"]

STAMP = ".peers-built"
NONROOT = "65532:65532"


@dataclass(frozen=True)
class PeerImage:
    name: str  # as upstream's manifests name it
    peer: Peer
    path: str  # where upstream's Deployment runs it from
    packages: tuple[str, ...]  # Debian's packages of what the binary links


# upstream's Makefile builds and its install YAML runs this name; its
# manager.yaml runs /manager; its cgo key generator links libczmq
FLUX_OPERATOR_IMAGE = "ghcr.io/flux-framework/flux-operator:latest"
PEER_IMAGES = (PeerImage(FLUX_OPERATOR_IMAGE, FLUX_OPERATOR, "/manager", ("libczmq4",)),)


def _inputs() -> str | None:
    """What the images pack (None when a peer is not built)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for image in PEER_IMAGES:
        binary = image.peer.binary()
        if binary is None:
            return None
        digest.update(f"{image.name}\0{binary.parent.parent.name}\n".encode())
    return digest.hexdigest()[:16]


def peer_images_current(images: Path) -> bool:
    stamp, inputs = images / STAMP, _inputs()
    return inputs is not None and stamp.is_file() and stamp.read_text().strip() == inputs


def build_peer_images(images: Path, registry_binary: Path) -> None:
    """Build every peer's image into the registry storage of ``images`` and
    stamp them. A peer not built is the caller's to report."""
    inputs = _inputs()
    assert inputs is not None, "a peer is not built (python -m tests.peers.build)"
    scratch = Path(tempfile.mkdtemp(prefix=".peers-", dir=images.parent))
    registry = Registry(registry_binary, images / "registry", f"127.0.0.1:{free_port()}",
                        scratch / "registry-run").start()  # fmt: skip
    try:
        started = time.monotonic()
        blobs = Blobs(scratch / "blobs")
        for image in PEER_IMAGES:
            binary = image.peer.binary()
            assert binary is not None
            base = debian_layer(blobs, scratch, image.peer.name, image.packages)
            program = blobs.layer_from_entries([(image.path, binary)])
            config = {"Entrypoint": [image.path], "User": NONROOT}
            push(registry.url, repository_name(image.name),
                 Image.make(blobs, [base, program], config), blobs)  # fmt: skip
        (images / STAMP).write_text(inputs + "\n")
        print(f"the peers' images in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        registry.stop()
        shutil.rmtree(scratch, ignore_errors=True)
