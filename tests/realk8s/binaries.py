"""Where the test cluster's binaries are, and whether they are current.

The Go programs in ``tests/realk8s/go/`` (the control plane, the kubelet's
HTTPS server, CoreDNS) are built by ``python -m tests.realk8s.build`` into a
cache outside the repository, in a directory named by a digest of everything
that decides what they are: the modules' go.mod, go.sum and Go sources, the
Go version and the version stamp. A pin changed in go.mod is a new digest and
so a new build; anything else finds the build it already has.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from functools import cache
from pathlib import Path

from tests.caches import user_cache

__all__ = [
    "CACHE_VARIABLE",
    "CGO_TAGS",
    "GO_DIR",
    "KUBERNETES_VERSION",
    "LINKS",
    "PROGRAMS",
    "bin_dir",
    "built",
    "cache_root",
    "go_version",
    "missing_binaries",
]

GO_DIR = Path(__file__).parent / "go"
# The release the kubernetes module requires; its staging modules are v0.<minor>.<patch>.
KUBERNETES_VERSION = "v1.36.3"
CACHE_VARIABLE = "FLUXHOP_REALK8S_CACHE"
# program -> (module directory under go/, package inside it)
PROGRAMS = {
    "k8s": ("kubernetes", "./k8s"),
    "coredns": ("coredns", "."),
    # The controllers fluxhop runs beside (issue: the real controllers): each a
    # module of its own whose go.mod names the controller as a tool at its
    # release, so its build list is the controller's own, as `go install
    # PKG@VERSION` would make it (which the proxy refuses here: it will not
    # list these modules' versions).
    "jobset": ("jobset", "sigs.k8s.io/jobset"),
    "kueue": ("kueue", "sigs.k8s.io/kueue/cmd/kueue"),
    "trainer-controller-manager": (
        "trainer",
        "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
    ),
    # The real nodes (tests/realk8s/node): upstream's kubelet and kube-proxy
    # of the control plane's release, containerd v2 (image volumes need
    # >= 2.1) with its runc shim, runc, the CNI plugins a bridge network
    # needs, and a registry (distribution) that serves the images built here.
    "kubelet": ("kubernetes", "k8s.io/kubernetes/cmd/kubelet"),
    "kube-proxy": ("kubernetes", "k8s.io/kubernetes/cmd/kube-proxy"),
    # fake GPUs through the kubelet's device-plugin API (upstream's plugin stub)
    "gpu-plugin": ("kubernetes", "./gpu-plugin"),
    "containerd": ("containerd", "github.com/containerd/containerd/v2/cmd/containerd"),
    "containerd-shim-runc-v2": (
        "containerd",
        "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
    ),
    "ctr": ("containerd", "github.com/containerd/containerd/v2/cmd/ctr"),
    "runc": ("runc", "github.com/opencontainers/runc"),
    "registry": ("registry", "github.com/distribution/distribution/v3/cmd/registry"),
    # a node whose pods read as running while nothing runs, for the scale
    # benchmarks (tests/realk8s/kwok.py), and the Stages it starts with
    "kwok": ("kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    "kwok-stages": ("kwok", "./stages"),
    **{
        f"cni/{plugin}": ("cni", f"github.com/containernetworking/plugins/plugins/{kind}/{plugin}")
        for kind, plugin in (
            ("main", "bridge"),
            ("main", "loopback"),
            ("ipam", "host-local"),
            ("meta", "portmap"),
        )
    },
}
# Programs that need cgo, with the build tags upstream's Makefile gives
# them: runc's seccomp filter is libseccomp's (Debian's libseccomp-dev).
CGO_TAGS = {"runc": "seccomp"}
# names the multi-call binary also answers to (it dispatches on its own name)
LINKS = {"kubectl": "k8s"}


def cache_root() -> Path:
    return user_cache(CACHE_VARIABLE, "realk8s")


@cache
def go_version() -> str | None:
    go = shutil.which("go")
    if go is None:
        return None
    done = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or None


def _digest(go: str) -> str:
    digest = hashlib.sha256(f"{go}\n{KUBERNETES_VERSION}\n".encode())
    for path in sorted(GO_DIR.rglob("*")):
        if path.is_file() and (path.suffix == ".go" or path.name in ("go.mod", "go.sum")):
            digest.update(str(path.relative_to(GO_DIR)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def bin_dir() -> Path | None:
    """The directory the current sources build into, or None without Go."""
    go = go_version()
    return None if go is None else cache_root() / _digest(go) / "bin"


def built(directory: Path) -> bool:
    """A build is complete once every program is there (they are moved in last)."""
    return all((directory / name).is_file() for name in PROGRAMS)


def missing_binaries() -> str | None:
    """Why the test cluster cannot run here, or None when its binaries are built."""
    directory = bin_dir()
    if directory is None:
        return "no Go toolchain on PATH: the test cluster is built from Go modules"
    if not built(directory):
        return f"the test cluster is not built (python -m tests.realk8s.build -> {directory})"
    return None
