"""Build what the real tiers run on: ``python -m tests.build``.

The README's build step. Each part builds into a cache outside the
repository and is a no-op when its cache is current:

* ``realk8s``: the test cluster and the controllers beside it, from Go
  modules (``tests/realk8s/build.py``), into ``~/.cache/fluxhop/realk8s``
  (``FLUXHOP_REALK8S_CACHE`` moves it);
* ``peers``: the Flux Operator from a copy of
  ``../shared/upstream/flux-operator`` (``tests/peers/build.py``), into
  ``~/.cache/fluxhop/peers`` (``FLUXHOP_PEERS_CACHE`` moves it);
* ``flux``: flux-core and Fluxion from ``../shared/upstream/flux``
  (``tests/realflux/build.py``), into ``/opt/software`` as root
  (where the pods of the real tiers can see it), ``~/.cache/fluxhop/flux``
  otherwise (``FLUXHOP_FLUX_CACHE`` moves it);
* ``images``: once those are built, the images the real nodes pull
  (Debian root filesystems, the Flux view with that Flux), pushed into a
  registry's storage (``tests/realk8s/images/build.py``), into
  ``~/.cache/fluxhop/images`` (``FLUXHOP_IMAGES_CACHE`` moves it).

First the Debian packages every part and the tests need are installed, in
one apt-get (root only; otherwise one line names them): Flux's build
dependencies (libczmq among them, which the Flux Operator links too) and
the MPI flavours of the MPI matrix. Then the parts run at
once (the images after the others), each as its own process: a cold build spends much of its time in
single-threaded steps (Go's links and module downloads, Flux's autogen and
configure), so two builds side by side keep both cores busy. Each part's
lines are prefixed with its name; the exit status is the first failure's.
``python -m tests.build flux`` builds one part.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from tests import debian
from tests.peers import PEERS
from tests.realflux.build import DEBIAN_PACKAGES as FLUX_PACKAGES
from tests.realk8s.mpi import FLAVOURS
from tests.realk8s.node import DEBIAN_PACKAGES as NODE_PACKAGES

PARTS = {
    "realk8s": "tests.realk8s.build",
    "flux": "tests.realflux.build",
    "peers": "tests.peers.build",
    "images": "tests.realk8s.images.build",
}
# parts that start once the first stage is done: the images pack its Flux
# and are pushed with its registry
LATER = ("images",)


def packages() -> list[str]:
    """What the builds and the tests need of Debian: Flux's build, and the MPI
    flavours the MPI matrix compiles its program with."""
    mpi = [name for flavour in FLAVOURS.values() for name in flavour.packages.split()]
    peers = [name for peer in PEERS.values() for name in peer.debian]
    return list(dict.fromkeys([*FLUX_PACKAGES, *mpi, *peers, *NODE_PACKAGES]))


def install_packages() -> None:
    """Once, before the parts run: apt-get holds a lock, so two parts could
    not each install their own side by side."""
    started = time.monotonic()
    try:
        installed = debian.install(packages(), "the builds and the real tiers")
    except debian.PackagesError as error:
        print(f"[packages] {error}", flush=True)  # each part says what it lacks
        return
    if installed:
        took = time.monotonic() - started
        print(f"[packages] installed {' '.join(installed)} in {took:.0f} s", flush=True)


def follow(
    name: str, process: subprocess.Popen[str], started: float, codes: dict[str, int]
) -> None:
    """Relay a part's lines, prefixed with its name, then say when it ended."""
    assert process.stdout is not None
    for line in process.stdout:
        print(f"[{name}] {line}", end="", flush=True)
    codes[name] = process.wait()
    print(f"[{name}] done in {time.monotonic() - started:.0f} s (status {codes[name]})", flush=True)


def run_parts(names: list[str], started: float, codes: dict[str, int]) -> bool:
    """Run ``names`` at once, each its own process; True when interrupted."""
    followers = []
    for name in names:
        process = subprocess.Popen(
            [sys.executable, "-u", "-m", PARTS[name]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        follower = threading.Thread(target=follow, args=(name, process, started, codes))
        follower.start()
        followers.append(follower)
    try:
        for follower in followers:
            follower.join()
    except KeyboardInterrupt:
        # ^C reached the parts too (one process group): they remove their
        # scratch directories as they stop; wait for that.
        for follower in followers:
            follower.join()
        return True
    return False


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in PARTS]
    if unknown:
        print(f"build: no part {unknown[0]!r}; parts: {', '.join(PARTS)}", file=sys.stderr)
        return 2
    install_packages()
    started = time.monotonic()
    codes: dict[str, int] = {}
    chosen = argv or list(PARTS)
    first = [name for name in chosen if name not in LATER]
    later = [name for name in chosen if name in LATER]
    for stage in (first, later):
        if any(codes.values()):
            break  # a later stage needs what failed
        if run_parts(stage, started, codes):
            return 130
    status = next((code for code in codes.values() if code), 0)
    print(f"build: ready after {time.monotonic() - started:.0f} s (status {status})", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
