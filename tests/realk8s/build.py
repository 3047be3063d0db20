"""Build the test cluster: ``python -m tests.realk8s.build``.

Builds the control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler as one multi-call binary ``k8s``), the kubelet's HTTPS server
and CoreDNS, the controllers beside it and the real nodes' programs from the
Go modules in ``tests/realk8s/go/`` (in two lanes side by side, ``lanes``),
with the Go on PATH and the Go module proxy, into the cache directory that
``tests.realk8s.binaries`` names. Nothing happens when that build exists, so
running it again is cheap; a changed pin is a new directory. Go's own caches
(``go env GOCACHE GOMODCACHE``) are outside the repository too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.realk8s.binaries import (
    CGO_TAGS,
    GO_DIR,
    KUBERNETES_VERSION,
    LINKS,
    PROGRAMS,
    bin_dir,
    built,
)


def version_stamp() -> str:
    """The -X flags that make /version report the release, as upstream's build
    does: an unstamped v0.0.0-master stops controllers that parse it (Kueue)."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return " ".join(
        f"-X {pkg}.{name}={value}"
        for name, value in (
            ("gitVersion", KUBERNETES_VERSION),
            ("gitMajor", major),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        )
    )


def go_environment(cgo: bool = False) -> dict[str, str]:
    return {
        **os.environ,
        # static, as upstream builds its server binaries; cgo where a program needs it
        "CGO_ENABLED": "1" if cgo else "0",
        "GOTOOLCHAIN": "local",  # a module asking for a newer Go fails, never downloads one
        "GOFLAGS": "-trimpath -mod=readonly -buildvcs=false",
    }


def lanes() -> list[list[str]]:
    """The programs in two lanes, built side by side: Kubernetes' (one
    module: its packages are compiled once for all its programs) and the
    rest. A lane spends much of its time in single-threaded steps (module
    downloads, links) that the other lane's compiles fill."""
    kubernetes = [name for name, (module, _) in PROGRAMS.items() if module == "kubernetes"]
    return [kubernetes, [name for name in PROGRAMS if name not in kubernetes]]


def build_program(name: str, staging: Path) -> None:
    module, package = PROGRAMS[name]
    started = time.monotonic()
    ldflags = "-s -w " + (version_stamp() if module == "kubernetes" else "")
    tags = CGO_TAGS.get(name)
    (staging / name).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", *(["-tags", tags] if tags else []), "-ldflags", ldflags,
         "-o", str(staging / name), package],
        cwd=GO_DIR / module,
        env=go_environment(cgo=tags is not None),
        check=True,
    )  # fmt: skip
    print(f"built {name} in {time.monotonic() - started:.0f} s", flush=True)


def build(target: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            done = [pool.submit(lambda lane: [build_program(n, staging) for n in lane], lane)
                    for lane in lanes()]  # fmt: skip
            for lane in done:
                lane.result()  # the first failure, once both lanes have stopped
        for link, program in LINKS.items():
            (staging / link).symlink_to(program)
        target.mkdir(exist_ok=True)
        for name in [*LINKS, *PROGRAMS]:  # complete only once all are in place (binaries.built)
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, target / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main() -> int:
    if shutil.which("go") is None:
        print("build: no go on PATH; the test cluster is built with Go 1.26", file=sys.stderr)
        return 1
    target = bin_dir()
    assert target is not None
    if built(target):
        print(f"test cluster {KUBERNETES_VERSION}: up to date in {target}")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"building the test cluster {KUBERNETES_VERSION} into {target}", flush=True)
    try:
        build(target)
    except subprocess.CalledProcessError as error:
        print(f"build: {' '.join(error.cmd[:2])} failed with {error.returncode}", file=sys.stderr)
        return 1
    for old in target.parent.parent.iterdir():  # builds of sources that are gone
        if old != target.parent and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    print(f"test cluster {KUBERNETES_VERSION}: built in {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
