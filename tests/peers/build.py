"""Build the peers: ``python -m tests.peers.build [name ...]``.

For each peer (``tests.peers.PEERS``): copy its upstream folder into a
scratch directory beside the cache, put upstream's replacements in place,
``go build`` it with upstream's flags and the Go module proxy, and move the
program into the cache directory its digest names. Nothing happens when that
program exists; older builds of a peer are removed once the new one is in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import debian
from tests.peers import PEERS, Peer

__all__ = ["build", "main"]


def go_environment(peer: Peer) -> dict[str, str]:
    return {
        **os.environ,
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",  # a module asking for a newer Go fails, never downloads one
        "GOFLAGS": "-trimpath -mod=readonly -buildvcs=false",
        **peer.environment,
    }


def build(peer: Peer, target: Path) -> None:
    """Build ``peer`` into ``target``/bin; complete only once the program is moved in."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".build-{peer.name}-", dir=target.parent))
    try:
        work = scratch / "src"
        shutil.copytree(peer.source(), work)  # a copy: the upstream folder stays read-only
        for destination, source in peer.replacements.items():
            shutil.copyfile(work / source, work / destination)
        program = scratch / peer.program
        subprocess.run(
            ["go", "build", "-ldflags", "-s -w", "-o", str(program), peer.package],
            cwd=work,
            env=go_environment(peer),
            check=True,
        )
        (target / "bin").mkdir(parents=True, exist_ok=True)
        os.replace(program, target / "bin" / peer.program)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def build_one(peer: Peer) -> int:
    target = peer.build_dir()
    if target is None:
        print(f"build: {peer.missing()}", file=sys.stderr)
        return 1
    if peer.binary() is not None:
        print(f"{peer.name}: up to date in {target}")
        return 0
    try:
        debian.install(peer.debian, f"building {peer.name}")
    except debian.PackagesError as error:
        print(f"build: {error}", file=sys.stderr)
        return 1
    print(f"building {peer.name} into {target}", flush=True)
    started = time.monotonic()
    try:
        build(peer, target)
    except subprocess.CalledProcessError as error:
        print(f"build: {peer.name}: go build failed with {error.returncode}", file=sys.stderr)
        return 1
    for old in target.parent.glob(f"{peer.name}-*"):  # builds of sources that are gone
        if old != target and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    print(f"{peer.name}: built in {time.monotonic() - started:.0f} s")
    return 0


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in PEERS]
    if unknown:
        print(f"build: no peer {unknown[0]!r}; peers: {', '.join(PEERS)}", file=sys.stderr)
        return 2
    if shutil.which("go") is None:
        print("build: no go on PATH; the peers are built with Go 1.26", file=sys.stderr)
        return 1
    codes = [build_one(PEERS[name]) for name in argv or list(PEERS)]
    return next((code for code in codes if code), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
