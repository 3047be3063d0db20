"""What a test cluster leaves on the machine, and removing it.

``LocalCluster.stop`` leaves nothing; a test run killed outright (SIGKILL)
leaves the nodes' processes and pods (they outlive the test, as containers
do), their network and the run directory: ``sweep``, which every start
runs first, removes them (with node/node.py's ``sweep_nodes``). ``leftovers`` lists whatever is there, for the tests to check.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.realk8s.bridge import NETNS_PREFIX, delete_everything, links, netns_names
from tests.realk8s.processes import kill_recorded

__all__ = ["RUN_DIR", "leftovers", "sweep"]

RUN_DIR = Path("/run/fluxhop-realk8s")


def _processes(markers: list[str]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(marker in cmdline for marker in markers):
            found.append(f"process {entry.name}: {cmdline[:120]}")
    return found


def leftovers(workdir: Path, bin_dir: Path | None) -> list[str]:
    """Processes of the cluster's binaries, its nodes or their pods, node
    network namespaces and links, mounts and directories of its own. Without
    ``bin_dir`` (a control plane beside the test cluster): its processes,
    which name its directory, and the directory."""
    if bin_dir is None:
        return _processes([f"{workdir}/"]) + ([f"directory {workdir}"] if workdir.exists() else [])
    markers = [str(bin_dir), str(RUN_DIR)]
    found = _processes(markers)
    found += [f"netns {name}" for name in netns_names() if name.startswith(NETNS_PREFIX)]
    found += [f"link {link}" for link in links()]
    with open("/proc/self/mountinfo") as f:
        found += [f"mount {line.split()[4]}" for line in f if str(RUN_DIR) in line.split()[4]]
    directories = [workdir, *Path("/etc/netns").glob(f"{NETNS_PREFIX}*")]
    return found + [f"directory {d}" for d in directories if d.exists()]


def sweep(workdir: Path, *, pod_network: bool = True) -> list[str]:
    """Remove what a killed run left; returns what it found (the nodes'
    network only where ``pod_network``: the test cluster's)."""
    ours = ("realk8s", str(RUN_DIR))  # the binaries' cache and the run directory say so
    left = [f"process {pid}" for pid in kill_recorded(workdir / "pids", ours)]
    if pod_network:
        left += delete_everything()
    if workdir.exists():
        left.append(f"directory {workdir}")
        shutil.rmtree(workdir, ignore_errors=True)
    return left
