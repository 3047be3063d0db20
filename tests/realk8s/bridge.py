"""The test cluster's network: one bridge, a network namespace per node.

Every node hangs off one Linux bridge (``fhk8s0``, 198.19.0.1/16, in the
range set aside for benchmarking networks, RFC 2544), node ``k`` at
198.19.254.<k+1> in a namespace of its own (``fhk8s-node<k>``,
tests/realk8s/node), whose pods are on a CNI bridge inside it and routed
from the host and the other nodes. The bridge's own address is where the
host serves what nodes and pods need from it: the API server, the cluster
DNS server, the registry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess

__all__ = [
    "BRIDGE",
    "GATEWAY",
    "GUEST_DNS",
    "GUEST_NODE_INDEX",
    "NETNS_PREFIX",
    "PREFIX_LENGTH",
    "VETH_PREFIX",
    "create_bridge",
    "delete_everything",
    "guest_address",
    "links",
    "netns_names",
]

BRIDGE = "fhk8s0"
GATEWAY = "198.19.0.1"
PREFIX_LENGTH = 16
# The bridge's own MAC, set: a Linux bridge whose MAC is not set takes the
# lowest of its ports', so it changed whenever the pod whose veth had it was
# deleted, and every other pod's neighbour entry for the gateway (the cluster
# DNS) pointed nowhere until it went stale: a worker's lookups of a new rank
# 0 went unanswered for up to 40 s (seen with a packet capture in its pod).
# CNI's bridge plugin sets it for the same reason.
BRIDGE_MAC = "02:66:68:6b:38:01"  # locally administered
# A second cluster whose nodes share the bridge (a guest of the test cluster,
# e.g. a second MultiKueue worker): its nodes' indexes start here (addresses
# 198.19.254.101 on, pods 198.18.101.0/24 on, below the Service range,
# 198.18.128.0/17), and its cluster DNS answers on GUEST_DNS.
GUEST_NODE_INDEX = 100
GUEST_DNS = "198.19.255.1"
NETNS_PREFIX = "fhk8s-"
VETH_PREFIX = "fhk"


class NetworkError(Exception):
    pass


def _ip(*args: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], input=stdin, capture_output=True, text=True)
    if check and done.returncode:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def create_bridge() -> None:
    """The bridge, with an address of its own set (BRIDGE_MAC)."""
    _ip(
        "-batch",
        "-",
        stdin=(
            f"link add {BRIDGE} address {BRIDGE_MAC} type bridge\n"
            f"addr add {GATEWAY}/{PREFIX_LENGTH} dev {BRIDGE}\n"
            f"link set {BRIDGE} up\n"
        ),
    )


def guest_address(present: bool) -> None:
    """GUEST_DNS on the bridge (``present``), or taken off it."""
    verb = "add" if present else "del"
    _ip("addr", verb, f"{GUEST_DNS}/{PREFIX_LENGTH}", "dev", BRIDGE, check=present)


def netns_names() -> list[str]:
    return [
        line.split()[0] for line in _ip("netns", "list", check=False).splitlines() if line.strip()
    ]


def links() -> list[str]:
    """The bridge and the pods' veths that exist."""
    return re.findall(
        rf"^\d+: ({VETH_PREFIX}\w+|{BRIDGE})[@:]", _ip("-o", "link", check=False), re.M
    )


def delete_everything(prefix: str = NETNS_PREFIX) -> list[str]:
    """Remove every node namespace (whose name starts with ``prefix``) with
    whatever still runs in it, and with the default prefix the veths and the
    bridge too; returns what it found (the fixture calls it first, for what a
    killed run left, and last)."""
    found = []
    for name in netns_names():
        if name.startswith(prefix):
            found.append(f"netns {name}")
            for pid in _ip("netns", "pids", name, check=False).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), 9)
            _ip("netns", "del", name, check=False)
            shutil.rmtree(f"/etc/netns/{name}", ignore_errors=True)
    if prefix != NETNS_PREFIX:
        return found  # their veths went with their namespaces
    for link in links():
        found.append(f"link {link}")
        _ip("link", "del", link, check=False)
    return found
