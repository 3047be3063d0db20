"""Build real Flux for the tests: ``python -m tests.realflux.build``.

flux-core and flux-sched (Fluxion) from the release tarballs in
``../shared/upstream/flux/`` are built into one prefix (``install.py`` says
where), so that ``flux`` loads Fluxion as every Flux view image does; and
flux-core once more for /usr, beside it (``build_in_usr``), for the images
with Flux installed. Nothing happens when both are complete; an incomplete one (a killed build) is
built again. The Debian packages the build needs are installed with apt-get
where this runs as root, and named in one line where it cannot.

Sources are unpacked into a scratch directory beside the prefix and removed
afterwards; nothing of Flux is ever written into the repository.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import debian
from tests.realflux.install import (
    FLUX_CORE,
    FLUX_SCHED,
    STAMP,
    Tarball,
    cache_root,
    complete,
    prefix_dir,
    tarballs,
    upstream_flux,
    usr_complete,
    usr_tree,
)

# What flux-core 0.88 and flux-sched 0.54 need on Debian 12 to build (the
# list in ../shared/upstream/README.md, less the docs' spell checker).
DEBIAN_PACKAGES = [
    "autoconf",
    "automake",
    "libtool",
    "make",
    "pkg-config",
    "g++",
    "libzmq3-dev",
    "libczmq-dev",
    "uuid-dev",
    "libjansson-dev",
    "liblz4-dev",
    "libarchive-dev",
    "libhwloc-dev",
    "libsqlite3-dev",
    "lua5.3",
    "liblua5.3-dev",
    "lua-posix",
    "libsodium-dev",
    "libmunge-dev",
    "libpam0g-dev",
    "python3-dev",
    "python3-cffi",
    "python3-yaml",
    "python3-ply",
    "python3-setuptools",
    "python3-jsonschema",
    "jq",
    "libncurses-dev",
    "libsystemd-dev",
    "libboost-dev",
    "libboost-system-dev",
    "libboost-filesystem-dev",
    "libboost-graph-dev",
    "libboost-regex-dev",
    "libedit-dev",
    "libyaml-cpp-dev",
    "cmake",
    "ninja-build",
    "file",
]
# Flux's Python bindings are built for, and run by, Debian's own Python.
PYTHON = "/usr/bin/python3"
JOBS = str(os.cpu_count() or 2)
# No debug info: the tests never debug Flux, and -g doubles flux-sched's compile time.
OPTIMIZE = "-O2"


class BuildError(Exception):
    """A step failed; the message is one line for the user."""


def install_packages() -> None:
    try:
        installed = debian.install(DEBIAN_PACKAGES, "building Flux")
    except debian.PackagesError as error:
        raise BuildError(str(error)) from None
    if installed:
        print(f"installed {len(installed)} Debian packages for Flux's build", flush=True)


def verified(tarball: Tarball) -> Path:
    if not tarball.path.is_file():
        raise BuildError(f"{tarball.path} is missing")
    digest = hashlib.sha256(tarball.path.read_bytes()).hexdigest()
    if digest != tarball.sha256:
        raise BuildError(f"{tarball.path.name} does not match its digest in SHA256SUMS")
    return tarball.path


def run(step: str, command: list[str], cwd: Path, log: Path, **env: str) -> None:
    """Run one build step, its output into ``log``; a failure names the log."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(
            command, cwd=cwd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        raise BuildError(f"{step} failed with status {done.returncode}; see {log}")


def unpack(tarball: Tarball, into: Path) -> Path:
    subprocess.run(["tar", "-xzf", str(verified(tarball)), "-C", str(into)], check=True)
    return into / f"{tarball.project}-{tarball.version}"


def build_core(tarball: Tarball, source: Path, prefix: Path, log: Path) -> None:
    make_core(tarball, source, log, [f"--prefix={prefix}"])


def make_core(
    tarball: Tarball, source: Path, log: Path, locations: list[str], destdir: Path | None = None
) -> None:
    """Configure flux-core with ``locations``, build it and install it
    (into ``destdir`` when given, as a package's staging root)."""
    # A release tarball of a tag is its git tree: no configure, and no git
    # history for the version, which FLUX_VERSION gives instead.
    run("flux-core autogen", ["./autogen.sh"], source, log, FLUX_VERSION=tarball.version)
    run(
        "flux-core configure",
        [
            "./configure",
            *locations,
            "--disable-docs",
            f"PYTHON={PYTHON}",
            "LUA=/usr/bin/lua5.3",  # Debian's lua-posix serves 5.1-5.3, not 5.4
            "LUA_VERSION=5.3",
            f"CFLAGS={OPTIMIZE}",
            f"CXXFLAGS={OPTIMIZE}",
        ],
        source,
        log,
    )
    run("flux-core make", ["make", f"-j{JOBS}"], source, log)
    staged = [f"DESTDIR={destdir}"] if destdir else []
    run("flux-core make install", ["make", "install", *staged], source, log)


def installed_outputs(build: Path) -> list[str]:
    """The build-tree files ``cmake --install`` copies: flux-sched's unit tests
    and their test framework (Catch2, built from source) are in its ``all``
    target, and building only what is installed saves most of its build."""
    outputs: set[str] = set()
    root = str(build)
    for script in build.rglob("cmake_install.cmake"):
        for path in re.findall(r'"(' + re.escape(root) + r'/[^"]+)"', script.read_text()):
            outputs.add(os.path.relpath(path, build))
    done = subprocess.run(
        ["ninja", "-t", "targets", "all"], cwd=build, capture_output=True, text=True, check=True
    )
    known = {line.rsplit(":", 1)[0] for line in done.stdout.splitlines()}
    return sorted(outputs & known)


def build_sched(tarball: Tarball, source: Path, prefix: Path, log: Path) -> None:
    build = source / "build"
    run(
        "flux-sched cmake",
        [
            "cmake",
            "-G",
            "Ninja",
            "-S",
            str(source),
            "-B",
            str(build),
            f"-DCMAKE_INSTALL_PREFIX={prefix}",
            f"-DPython_EXECUTABLE={PYTHON}",  # else CMake may pick another Python
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_CXX_FLAGS_RELEASE={OPTIMIZE} -DNDEBUG",
            f"-DCMAKE_C_FLAGS_RELEASE={OPTIMIZE} -DNDEBUG",
        ],
        source,
        log,
        FLUX_SCHED_VERSION=tarball.version,
        PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"),
    )
    run("flux-sched build", ["ninja", f"-j{JOBS}", *installed_outputs(build)], build, log)
    run("flux-sched install", ["cmake", "--install", str(build)], build, log)
    link_fluxion_python(prefix)


def link_fluxion_python(prefix: Path) -> None:
    """Debian's Python installs flux-sched's package under local/lib/.../
    dist-packages; ``flux python`` looks in lib/python3.X/site-packages, where
    flux-core's own package is."""
    for package in prefix.glob("local/lib/python3*/dist-packages/fluxion"):
        site = prefix / "lib" / package.parent.parent.name / "site-packages"
        site.mkdir(parents=True, exist_ok=True)
        target = site / "fluxion"
        if not target.exists():
            target.symlink_to(package)


def build(prefix: Path) -> None:
    sources = tarballs()
    assert sources is not None
    install_packages()
    prefix.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(prefix, ignore_errors=True)  # an incomplete build starts over
    scratch = Path(tempfile.mkdtemp(prefix=".src-", dir=prefix.parent))
    log = prefix.parent / f"{prefix.name}.log"
    log.write_text("")
    try:
        for project, step in ((FLUX_CORE, build_core), (FLUX_SCHED, build_sched)):
            started = time.monotonic()
            tarball = sources[project]
            step(tarball, unpack(tarball, scratch), prefix, log)
            print(f"built {project} {tarball.version} in {time.monotonic() - started:.0f} s")
        (prefix / STAMP).write_text(" ".join(t.path.name for t in sources.values()) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_in_usr(prefix: Path) -> None:
    """The build in the prefix, for /usr: flux-core configured for /usr
    and staged into ``usr_tree(prefix)``, and Fluxion's files from the
    prefix placed where a /usr install places them. Fluxion is not built
    again: it compiles in no path of its own (only a RUNPATH into the
    prefix, which the loader passes over where it is absent), and its
    build is most of Flux's (flux-core takes about 2 min of 14 cold)."""
    sources = tarballs()
    assert sources is not None
    install_packages()
    tree = usr_tree(prefix)
    shutil.rmtree(tree, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix=".src-", dir=prefix.parent))
    log = prefix.parent / f"{tree.name}.log"
    log.write_text("")
    try:
        started = time.monotonic()
        tarball = sources[FLUX_CORE]
        locations = ["--prefix=/usr", "--sysconfdir=/etc", "--localstatedir=/var"]
        make_core(tarball, unpack(tarball, scratch), log, locations, destdir=tree)
        place_fluxion(prefix, tree)
        (tree / STAMP).write_text((prefix / STAMP).read_text())
        print(f"built flux-core {tarball.version} for /usr in {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def in_usr(relative: Path) -> Path:
    """Where a /usr install has what the prefix has at ``relative`` (pure)."""
    return relative if relative.parts[0] in ("etc", "var") else Path("usr") / relative


def place_fluxion(prefix: Path, tree: Path) -> None:
    """Whatever the prefix has that flux-core's /usr install does not -
    Fluxion's modules, library, rc scripts, Python package and the link to
    it - at its /usr place; a link into the prefix points at that place."""
    for path in sorted(prefix.rglob("*")):
        relative = path.relative_to(prefix)
        target = tree / in_usr(relative)
        if relative.name == STAMP or os.path.lexists(target):
            continue
        if path.is_dir() and not path.is_symlink():
            target.mkdir(parents=True)
        elif path.is_symlink():
            link = Path(os.readlink(path))
            if link.is_absolute() and link.is_relative_to(prefix):
                link = Path("/") / in_usr(link.relative_to(prefix))
            target.symlink_to(link)
        else:
            shutil.copy2(path, target)


def main() -> int:
    prefix = prefix_dir()
    if prefix is None:
        print(f"build: no Flux release tarballs in {upstream_flux()}", file=sys.stderr)
        return 1
    if complete(prefix) and usr_complete(prefix):
        print(f"Flux: up to date in {prefix}")
        return 0
    try:
        if not complete(prefix):
            print(f"building flux-core and flux-sched into {prefix}", flush=True)
            build(prefix)
        print(f"building flux-core for /usr into {usr_tree(prefix)}", flush=True)
        build_in_usr(prefix)
    except BuildError as error:
        print(f"build: {error}", file=sys.stderr)
        return 1
    # builds of tarballs that are gone (only ours: /opt/software is shared)
    for old in cache_root().glob(f"{FLUX_CORE}-*"):
        if old.is_dir() and old not in (prefix, usr_tree(prefix)):
            shutil.rmtree(old, ignore_errors=True)
    print(f"Flux: built in {prefix} and, for /usr, in {usr_tree(prefix)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
