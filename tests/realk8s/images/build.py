"""Build the images the real nodes pull: ``python -m tests.realk8s.images.build``.

Debian 12 root filesystems from apt's own configured sources (mmdebstrap,
as root: no daemon), written as OCI images (``oci.py``) and pushed into a
registry's storage in a cache outside the repository
(``~/.cache/fluxhop/images/<digest>``, ``FLUXHOP_IMAGES_CACHE`` moves it),
which the test cluster's registry serves (``registry.py``). The digest is
taken over this recipe and the Flux build it packs: a changed recipe or a
new Flux is a new build, anything else a no-op.

The images, under the names upstream manifests and fluxhop's examples use,
so that they resolve unchanged through the nodes' mirror configuration:

* ``registry.k8s.io/pause``: the pod sandbox (``pause.c``, static);
* the Flux view images (``FLUX_VIEW_IMAGES``): the base below plus the
  project's flux-core and Fluxion build as a Spack install tree in
  ``/opt/software`` (real files) and a view of it in
  ``/opt/views/._view/<hash>`` whose files are links into it, ``/opt/view``
  and ``/opt/views/view`` linking to the view, as the Flux Operator's view
  images lay it out;
* ``fluxrm/flux-sched:bookworm``: the base with that Flux installed in
  /usr, as upstream's image has it (the same build for /usr,
  tests/realflux ``build_in_usr``), for MiniClusters whose image has Flux
  (``--flux-in-image``, the Flux Operator's view disabled), and the same
  under the rabbit MiniClusters' default image (``RABBIT_IMAGE``);
* the application images the examples name (``ubuntu:noble``,
  ``ubuntu:jammy``, and ``rockylinux:9`` of two of the Flux Operator's):
  Debian 12 with what Flux needs at run time (``RUNTIME_PACKAGES``), since
  the view's Flux was built on Debian 12 and runs with its libraries.
  Stand-ins by name, not Ubuntu or Rocky: what matters to a MiniCluster is
  that Flux from the view runs in them (on a real Rocky 9, glibc 2.34, the
  Ubuntu 24.04 view's Flux does not: fluxhop warns of it);
* ``metric-lammps:latest`` (``LAMMPS_IMAGE``, which the LAMMPS examples
  name): that base with Debian's LAMMPS (built with Open MPI) and its
  examples where the upstream image has them (``/opt/lammps/examples``);
* ``MPI_IMAGE``: that one with Flux in /usr as ``FLUX_IMAGE`` has it, MPICH's runtime
  beside Open MPI's, and the MPI matrix's program (tests/realk8s/mpi) built
  here by each flavour's compiler wrapper (``/usr/local/bin/matrix-<flavour>``);
* ``python:3.12-slim`` (``BASE_IMAGE``, the operator Dockerfile's base):
  Debian 12's Python and pip;
* fluxhop operator's image, under the name ``deploy/`` runs, built from the
  project's Dockerfile on that base (``operator_image.py``: buildah),
  rebuilt alone when fluxhop changes;
* the peers' images (``peer_images.py``): the Flux Operator's binary
  (tests/peers) on Debian 12 with libczmq, under upstream's name, rebuilt
  alone when its build changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fluxhop.rabbit.request import DEFAULT_IMAGE as RABBIT_IMAGE
from tests.caches import user_cache
from tests.realflux import flux_prefix
from tests.realflux.install import usr_complete, usr_tree
from tests.realk8s.binaries import bin_dir
from tests.realk8s.images.debian import SUITE, debian_layer
from tests.realk8s.images.oci import Blobs, Image, Layer, push, tree_entries
from tests.realk8s.images.operator_image import (
    BASE_IMAGE,
    build_operator_image,
    operator_image_current,
)
from tests.realk8s.images.peer_images import PEER_IMAGES, build_peer_images, peer_images_current
from tests.realk8s.images.registry import Registry, repository_name
from tests.realk8s.mpi import FLAVOURS, SOURCE
from tests.realk8s.mpi import build as build_program
from tests.realk8s.ports import free_port

__all__ = [
    "APPLICATION_IMAGES",
    "FLUX_IMAGE",
    "FLUX_VIEW_IMAGES",
    "LAMMPS_IMAGE",
    "MPI_IMAGE",
    "PAUSE_IMAGE",
    "RUNTIME_PACKAGES",
    "built_images",
    "images_dir",
    "missing_images",
]

HERE = Path(__file__).parent
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# The Flux view images the view init containers start from: Kubeflow
# Trainer's flux plugin's (its default, and the one its examples name), the
# Flux Operator's default (spec.flux.container.image), and the one the Flux
# Operator's OSU example, and so examples/mpi-hello-openmpi.yaml, name.
FLUX_VIEW_IMAGES = (
    "ghcr.io/converged-computing/flux-view-ubuntu:tag-focal",
    "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
    "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble",
)
APPLICATION_IMAGES = (
    "docker.io/library/ubuntu:noble",
    "docker.io/library/ubuntu:jammy",
    "docker.io/library/rockylinux:9",  # upstream's persistent and scaling examples'
)
# An image with Flux installed (--flux-in-image): upstream's name for
# flux-sched on Debian 12, here the base with the project's Flux in /usr.
FLUX_IMAGE = "docker.io/fluxrm/flux-sched:bookworm"
# the same under the image a rabbit MiniCluster runs unless its job names
# another (rabbit.mpi.image; Flux in it, as add_flux is false there)
IMAGES_WITH_FLUX = (FLUX_IMAGE, RABBIT_IMAGE)
LAMMPS_IMAGE = "ghcr.io/converged-computing/metric-lammps:latest"
# the tests' own, under a host the nodes mirror (node/config.py MIRRORED_HOSTS)
MPI_IMAGE = "ghcr.io/fluxhop-test/mpi-matrix:bookworm"
# On the base: LAMMPS (its lmp links Open MPI, which comes with it) and
# its examples, MPICH's library for the matrix's MPICH program, and GNU
# time (the Flux Operator's logging.timed runs /usr/bin/time)
APPS_PACKAGES = ["lammps", "lammps-examples", "libmpich12", "time"]
# What the Flux build (tests/realflux) links and runs on Debian 12: the
# libraries of its programs and modules (ldd of every one, less the
# essential ones), the Python modules and Lua its commands and rc scripts
# load, and the tools fluxhop's scripts call.
RUNTIME_PACKAGES = [
    "python3",
    "libpython3.11",
    "python3-cffi-backend",
    "python3-yaml",
    "python3-ply",
    "lua5.3",
    "lua-posix",
    "liblua5.3-0",
    "libzmq5",
    "libsodium23",
    "libjansson4",
    "liblz4-1",
    "libarchive13",
    "libhwloc15",
    "libsqlite3-0",
    "libuuid1",
    "libsystemd0",
    "libboost-graph1.74.0",
    "libboost-regex1.74.0",
    "libyaml-cpp0.7",
    "hostname",
    "procps",
]
# the operator Dockerfile's base (operator_image.BASE_IMAGE): Debian 12's
# Python (3.11, which fluxhop supports) under the python image's name
PYTHON_PACKAGES = ("python3", "python3-pip", "ca-certificates")
CACHE_VARIABLE = "FLUXHOP_IMAGES_CACHE"
STAMP = ".built"
VIEW_HASH = "fluxhop"  # the view's directory under /opt/views/._view


def cache_root() -> Path:
    return user_cache(CACHE_VARIABLE, "images")


def _digest(prefix: Path | None) -> str:
    digest = hashlib.sha256(f"{SUITE}\n{prefix}\n".encode())
    for path in (HERE / "build.py", HERE / "debian.py", HERE / "oci.py", HERE / "pause.c", SOURCE):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def images_dir() -> Path:
    """Where the current recipe and Flux build their images."""
    return cache_root() / _digest(flux_prefix())


def built_images() -> Path | None:
    """The registry storage of the current images, or None when not built."""
    directory = images_dir()
    return directory / "registry" if (directory / STAMP).is_file() else None


def missing_images() -> str | None:
    if built_images() is None:
        return f"the real nodes' images are not built (python -m tests.realk8s.images.build -> {images_dir()})"
    return None


def base_layer(
    blobs: Blobs, scratch: Path, name: str = "base", more: tuple[str, ...] = (),
    hooks: tuple[str, ...] = (), packages: tuple[str, ...] = tuple(RUNTIME_PACKAGES),
) -> Layer:  # fmt: skip
    """Debian 12 with ``packages`` (RUNTIME_PACKAGES) and ``more``."""
    return debian_layer(blobs, scratch, name, [*packages, *more], hooks)


def apps_layer(blobs: Blobs, scratch: Path) -> Layer:
    """The base with APPS_PACKAGES, LAMMPS's examples where metric-lammps has them."""
    link = "mkdir -p $1/opt/lammps && ln -s /usr/share/lammps/examples $1/opt/lammps/examples"
    return base_layer(blobs, scratch, "apps", tuple(APPS_PACKAGES), (link,))


def programs_layer(blobs: Blobs, scratch: Path) -> Layer:
    """The MPI matrix's program of each flavour whose wrapper is installed
    here (python -m tests.build installs them): the base is Debian 12 as
    this machine is, so what it links is in the apps layer."""
    entries: list[tuple[str, Path | str | None]] = [("usr", None), ("usr/local", None),
                                                    ("usr/local/bin", None)]  # fmt: skip
    for name, flavour in FLAVOURS.items():
        if flavour.missing() is None:
            entries.append((f"usr/local/bin/matrix-{name}", build_program(flavour, scratch)))
    return blobs.layer_from_entries(entries)


def python_layer(blobs: Blobs, scratch: Path) -> Layer:
    """Debian 12 with its Python and pip, pip free to install into it as the
    python image's is (no EXTERNALLY-MANAGED): the operator Dockerfile's base."""
    unmanaged = "rm -f $1/usr/lib/python3*/EXTERNALLY-MANAGED"
    return base_layer(blobs, scratch, "python", PYTHON_PACKAGES, (unmanaged,), packages=())


def pause_layer(blobs: Blobs, scratch: Path) -> Layer:
    binary = scratch / "pause"
    subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(HERE / "pause.c")], check=True)
    return blobs.layer_from_entries([("pause", binary)])


def view_entries(prefix: Path) -> list[tuple[str, Path | str | None]]:
    """The Flux build at its own path (under /opt/software), and a Spack
    view of it: its directories, each file a link to the installed one."""
    entries: list[tuple[str, Path | str | None]] = []
    parents = [p for p in reversed(prefix.parents) if p != Path("/")]
    entries += [(str(p), None) for p in parents]
    entries += tree_entries(prefix, str(prefix))
    view = f"/opt/views/._view/{VIEW_HASH}"
    entries += [("/opt/views", None), ("/opt/views/._view", None), (view, None)]
    for path in sorted(prefix.rglob("*")):
        relative = path.relative_to(prefix)
        if path.is_dir() and not path.is_symlink():
            entries.append((f"{view}/{relative}", None))
        else:
            entries.append((f"{view}/{relative}", str(path)))
    for python in sorted(prefix.glob("lib/python3*")):  # the libpython a view carries
        soname = f"lib{python.name}.so.1.0"
        entries.append((f"{view}/lib/{soname}", f"/usr/lib/x86_64-linux-gnu/{soname}"))
    entries += [("/opt/views/view", f"._view/{VIEW_HASH}"), ("/opt/view", "/opt/views/view")]
    return entries


def usr_entries(tree: Path) -> list[tuple[str, Path | str | None]]:
    """Flux installed for /usr (``tree``: its usr/, etc/, var/) at the root."""
    entries: list[tuple[str, Path | str | None]] = []
    for top in sorted(p for p in tree.iterdir() if p.is_dir()):
        entries += tree_entries(top, top.name)
    return entries


def build(target: Path, prefix: Path, registry_binary: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        blobs = Blobs(target / "blobs")
        started = time.monotonic()
        base = base_layer(blobs, scratch)
        print(
            f"base (Debian {SUITE} and Flux's runtime) in {time.monotonic() - started:.0f} s",
            flush=True,
        )
        started = time.monotonic()
        flux = blobs.layer_from_entries(view_entries(prefix))
        installed = blobs.layer_from_entries(usr_entries(usr_tree(prefix)))
        pause = pause_layer(blobs, scratch)
        print(f"the Flux view and pause layers in {time.monotonic() - started:.0f} s", flush=True)
        started = time.monotonic()
        apps, programs = apps_layer(blobs, scratch), programs_layer(blobs, scratch)
        python = python_layer(blobs, scratch)
        print(f"the applications' layers (LAMMPS, MPI, Python) in {time.monotonic() - started:.0f} s",
              flush=True)  # fmt: skip
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        shell = {"Env": [f"PATH={path}"]}
        images = {
            PAUSE_IMAGE: Image.make(blobs, [pause], {"Entrypoint": ["/pause"]}),
            **{
                name: Image.make(blobs, [base, flux], {**shell, "Cmd": ["/bin/bash"]})
                for name in FLUX_VIEW_IMAGES
            },
            **{
                name: Image.make(blobs, [base], {**shell, "Cmd": ["/bin/bash"]})
                for name in APPLICATION_IMAGES
            },
            **{
                name: Image.make(blobs, [base, installed], {**shell, "Cmd": ["/bin/bash"]})
                for name in IMAGES_WITH_FLUX
            },
            LAMMPS_IMAGE: Image.make(blobs, [apps], {**shell, "Cmd": ["/bin/bash"]}),
            MPI_IMAGE: Image.make(blobs, [apps, installed, programs], {**shell, "Cmd": ["/bin/bash"]}),
            BASE_IMAGE: Image.make(blobs, [python], {**shell, "Cmd": ["python3"]}),
        }  # fmt: skip
        storage = target / "registry"
        registry = Registry(
            registry_binary, storage, f"127.0.0.1:{free_port()}", scratch / "registry-run"
        ).start()
        try:
            for name, image in images.items():
                push(registry.url, repository_name(name), image, blobs)
        finally:
            registry.stop()
        shutil.rmtree(target / "blobs")  # the registry holds them now
        (target / STAMP).write_text("\n".join(images) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    if os.geteuid() != 0:  # so do the real nodes: their tests skip, saying so
        print("images: not built: root filesystems need root (mmdebstrap --mode=root)")
        return 0
    prefix = flux_prefix()
    if prefix is None:
        print(
            "images: no Flux build to put in the view images (python -m tests.realflux.build)",
            file=sys.stderr,
        )
        return 1
    if not prefix.is_relative_to("/opt/software"):
        print(
            f"images: the Flux view needs Flux built under /opt/software, not {prefix}",
            file=sys.stderr,
        )
        return 1
    if not usr_complete(prefix):
        print(f"images: no Flux built for /usr in {usr_tree(prefix)} (python -m tests.realflux.build)",
              file=sys.stderr)  # fmt: skip
        return 1
    binaries = bin_dir()
    if binaries is None or not (binaries / "registry").is_file():
        print("images: no registry built (python -m tests.realk8s.build)", file=sys.stderr)
        return 1
    target = images_dir()
    if (target / STAMP).is_file():
        print(f"images: up to date in {target}")
        return operator(target, binaries / "registry")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    print(f"building the real nodes' images into {target}", flush=True)
    try:
        build(target, prefix, binaries / "registry")
    except (subprocess.CalledProcessError, RuntimeError) as error:
        print(f"images: {error}", file=sys.stderr)
        return 1
    for old in target.parent.iterdir():  # images of recipes that are gone
        if old != target and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    print(f"images: built in {target}")
    return operator(target, binaries / "registry")


def operator(target: Path, registry: Path) -> int:
    """The images rebuilt alone, into the same registry storage: the
    operator's from the Dockerfile when fluxhop changes (operator_image.py),
    the peers' when a peer's build does (peer_images.py)."""
    return max(_operator_image(target, registry), _peer_images(target, registry))


def _operator_image(target: Path, registry: Path) -> int:
    if operator_image_current(target):
        print("images: the operator's image is up to date")
        return 0
    if shutil.which("buildah") is None:
        print("images: the operator's image needs buildah (python -m tests.build installs it)",
              file=sys.stderr)  # fmt: skip
        return 1
    return _built("the operator's image", build_operator_image, target, registry)


def _built(what: str, build: Callable[[Path, Path], None], target: Path, registry: Path) -> int:
    """``build`` into ``target``'s registry storage; 1 (and why) if it failed."""
    try:
        build(target, registry)
    except subprocess.CalledProcessError as error:
        print(f"images: {what}: {error}", file=sys.stderr)
        return 1
    return 0


def _peer_images(target: Path, registry: Path) -> int:
    if peer_images_current(target):
        print("images: the peers' images are up to date")
        return 0
    missing = [image.peer.name for image in PEER_IMAGES if image.peer.binary() is None]
    if missing:  # their tests skip, saying so
        print(f"images: no image for {', '.join(missing)}: not built (python -m tests.peers.build)")
        return 0
    return _built("the peers' images", build_peer_images, target, registry)


if __name__ == "__main__":
    sys.exit(main())
