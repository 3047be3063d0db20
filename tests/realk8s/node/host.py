"""What real nodes change on the machine outside their own directories, and
putting it back: the kubelet's sysctls, the cgroups of the nodes' pods, the
mounts under the run directory, /var/log/containers and
/var/lib/kubelet/device-plugins (which a kubelet makes whatever its root).
``stop`` and the next start's sweep call these; none of them touches what
the test cluster did not make."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import time
from pathlib import Path

__all__ = [
    "CGROUP_PARENT",
    "cgroup_hierarchies",
    "kill_cgroup",
    "make_cgroup",
    "record_host",
    "remove_cgroup",
    "restore_host",
    "unmount_under",
]

CGROUP_PARENT = "fhk8s"  # every real node's cgroup root is /fhk8s/<node>
# the kubelet sets these (protectKernelDefaults: false) for its own needs
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
KUBELET_PATHS = ("/var/lib/kubelet", "/var/log/containers", "/var/log/pods")
MNT_DETACH = 2


def cgroup_hierarchies() -> list[Path]:
    """Each mounted cgroup hierarchy (v1's controllers, and cgroup2)."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            kind = fields[fields.index("-") + 1]
            if kind in ("cgroup", "cgroup2"):
                found.append(Path(fields[4]))
    return sorted(set(found))


def make_cgroup(relative: str) -> None:
    """``relative`` in every hierarchy; in v1's cpuset, each new level takes
    its parent's CPUs and memory nodes (a new cpuset has none, and takes
    no process)."""
    for hierarchy in cgroup_hierarchies():
        path = hierarchy
        for part in Path(relative).parts:
            parent, path = path, path / part
            if path.is_dir():
                continue
            path.mkdir()
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (parent / name).exists() and not (path / name).read_text().strip():
                    (path / name).write_text((parent / name).read_text())


def _tree(directory: Path) -> list[Path]:
    """``directory`` and the cgroups under it, deepest first."""
    if not directory.is_dir():
        return []
    found = [Path(root) for root, _, _ in os.walk(directory)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def kill_cgroup(relative: str, timeout: float = 20) -> list[int]:
    """SIGKILL every process in the cgroup ``relative`` and below, in every
    hierarchy, until none is left; returns the pids found."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        found = set()
        for hierarchy in cgroup_hierarchies():
            for group in _tree(hierarchy / relative):
                with contextlib.suppress(OSError):
                    found.update(int(p) for p in (group / "cgroup.procs").read_text().split())
        if not found or time.monotonic() > deadline:
            return sorted(killed)
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= found
        time.sleep(0.05)


def remove_cgroup(relative: str) -> list[str]:
    """rmdir the cgroup ``relative`` and those under it (empty ones: call
    kill_cgroup first); returns those still there."""
    left = []
    for hierarchy in cgroup_hierarchies():
        for group in _tree(hierarchy / relative):
            try:
                group.rmdir()
            except OSError:
                left.append(str(group))
    return left


def unmount_under(directory: Path) -> list[str]:
    """Detach every mount at or below ``directory``, deepest first (the
    kubelet's volumes, containerd's root filesystems and pod network
    namespaces); returns the mount points."""
    prefix = str(directory).rstrip("/") + "/"
    libc = ctypes.CDLL(None, use_errno=True)
    points: list[str] = []
    for _ in range(5):  # a mount can be stacked on another at one point
        with open("/proc/self/mountinfo") as f:
            found = [line.split()[4] for line in f]
        found = [p for p in found if (p + "/").startswith(prefix)]
        if not found:
            break
        for point in sorted(set(found), key=lambda p: p.count("/"), reverse=True):
            libc.umount2(point.encode(), MNT_DETACH)
            points.append(point)
    return sorted(set(points))


def record_host(record: Path) -> None:
    """Note what the kubelets will change, once, before the first starts."""
    if record.exists():
        return
    values = {name: Path("/proc/sys", name).read_text().strip() for name in SYSCTLS}
    absent = [path for path in KUBELET_PATHS if not os.path.lexists(path)]
    record.write_text(json.dumps({"sysctls": values, "absent": absent}))


def restore_host(record: Path, run_dir: Path) -> list[str]:
    """Put back what ``record_host`` noted; returns what was changed."""
    if not record.exists():
        return []
    noted = json.loads(record.read_text())
    changed = []
    for name, value in noted["sysctls"].items():
        path = Path("/proc/sys", name)
        if path.read_text().strip() != value:
            path.write_text(value)
            changed.append(f"sysctl {name}")
    for link in Path("/var/log/containers").glob("*.log"):
        with contextlib.suppress(OSError):
            if os.readlink(link).startswith(str(run_dir)):
                link.unlink()
    for path in noted["absent"]:
        if os.path.lexists(path):
            changed.append(f"path {path}")
            shutil.rmtree(path, ignore_errors=True)
    record.unlink()
    return changed
