"""The test cluster's pod network: one bridge, a network namespace per pod.

All nodes' pods hang off one Linux bridge (``fhk8s0``, 198.19.0.1/16, an
address range set aside for benchmarking networks, RFC 2544): node ``k``
hands out 198.19.<k+1>.<n>, so the nodes never need to agree on addresses,
and every pod reaches every other, as a flat pod network (a CNI such as
kindnet) gives. The bridge's own address is where the host serves what
pods need from it: the cluster DNS server. NetworkPolicy is not enforced.

Each pod's namespace is ``fhk8s-<node>-<slot>``; ``ip netns exec`` mounts
``/etc/netns/<name>/hosts`` and ``resolv.conf`` over /etc's, which is how the
pod gets the files the kubelet writes for it (``hosts_file``,
``resolv_conf``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
from typing import Any

__all__ = [
    "BRIDGE",
    "GATEWAY",
    "GUEST_DNS",
    "GUEST_NODE_INDEX",
    "GUEST_REAL_NODE_INDEX",
    "NETNS_PREFIX",
    "NodeNetwork",
    "create_bridge",
    "delete_everything",
    "guest_address",
    "hosts_file",
    "links",
    "netns_names",
    "resolv_conf",
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
# e.g. a second MultiKueue worker): its nodes' indexes start here, so their
# pods get 198.19.201.x and up, and its cluster DNS answers on GUEST_DNS.
GUEST_NODE_INDEX = 200
# a guest's real nodes: addresses 198.19.254.101 on, pods 198.18.101.0/24 on
# (below the Service range, 198.18.128.0/17)
GUEST_REAL_NODE_INDEX = 100
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
    """Remove every pod namespace (whose name starts with ``prefix``) with
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
        return found  # one node's pods: their veths went with their namespaces
    for link in links():
        found.append(f"link {link}")
        _ip("link", "del", link, check=False)
    return found


def hosts_file(pod: dict[str, Any], ip: str, cluster_domain: str) -> str:
    """The kubelet's managed /etc/hosts for a pod."""
    hostname, fqdn = pod_hostname(pod, cluster_domain)
    lines = [
        "# Kubernetes-managed hosts file.",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        "fe00::0\tip6-localnet",
        "fe00::0\tip6-mcastprefix",
        "fe00::1\tip6-allnodes",
        "fe00::2\tip6-allrouters",
        f"{ip}\t{fqdn}\t{hostname}" if fqdn != hostname else f"{ip}\t{hostname}",
    ]
    aliases = pod["spec"].get("hostAliases") or []
    if aliases:
        lines.append("\n# Entries added by HostAliases.")
        lines += [f"{a['ip']}\t{chr(9).join(a.get('hostnames') or [])}" for a in aliases]
    return "\n".join(lines) + "\n"


def pod_hostname(pod: dict[str, Any], cluster_domain: str) -> tuple[str, str]:
    """The pod's host name and its FQDN (the host name without a subdomain)."""
    spec = pod["spec"]
    hostname = (spec.get("hostname") or pod["metadata"]["name"])[:63].rstrip("-.")
    subdomain = spec.get("subdomain")
    if not subdomain:
        return hostname, hostname
    namespace = pod["metadata"].get("namespace", "default")
    return hostname, f"{hostname}.{subdomain}.{namespace}.svc.{cluster_domain}"


def resolv_conf(pod: dict[str, Any], nameserver: str, cluster_domain: str) -> str:
    """The pod's resolv.conf by its dnsPolicy (ClusterFirst, None, Default)."""
    spec = pod["spec"]
    policy = spec.get("dnsPolicy", "ClusterFirst")
    namespace = pod["metadata"].get("namespace", "default")
    if policy == "Default":
        with open("/etc/resolv.conf") as f:
            return f.read()
    servers, searches, options = [], [], []
    if policy != "None":
        servers = [nameserver]
        searches = [f"{namespace}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
        options = ["ndots:5"]
    config = spec.get("dnsConfig") or {}
    servers += config.get("nameservers") or []
    searches += [s for s in config.get("searches") or [] if s not in searches]
    for option in config.get("options") or []:
        text = option["name"] + (f":{option['value']}" if option.get("value") else "")
        options = [o for o in options if o.split(":")[0] != option["name"]] + [text]
    out = []
    if searches:
        out.append("search " + " ".join(searches))
    out += [f"nameserver {s}" for s in servers]
    if options:
        out.append("options " + " ".join(options))
    return "\n".join(out) + "\n"


class NodeNetwork:
    """The addresses and namespaces of one node's pods."""

    def __init__(self, index: int) -> None:
        if not 0 <= index < 250:
            raise NetworkError("node index must be 0..249")
        self.index = index
        self.lock = threading.Lock()
        self.used: set[int] = set()
        self.last = 1  # the slot given last: the next pod gets the next free one after it

    def netns(self, slot: int) -> str:
        return f"{NETNS_PREFIX}{self.index}-{slot}"

    def create(self) -> tuple[int, str]:
        """A new pod network: its slot and the pod's IP."""
        with self.lock:
            # Round robin, as CNI's host-local IPAM gives addresses: a pod's
            # address is not given again at once, so a new pod never answers
            # at an address its peers still hold the old pod's MAC for (the
            # neighbour entry going stale took ~20 s to heal).
            order = [*range(self.last + 1, 255), *range(2, self.last + 1)]
            slot = next(n for n in order if n not in self.used)
            self.used.add(slot)
            self.last = slot
        ip, netns, veth = (
            f"198.19.{self.index + 1}.{slot}",
            self.netns(slot),
            f"{VETH_PREFIX}{self.index}v{slot}",
        )
        _ip(
            "-batch",
            "-",
            stdin=(
                f"netns add {netns}\n"
                f"link add {veth} type veth peer name eth0 netns {netns}\n"
                f"link set {veth} master {BRIDGE} up\n"
            ),
        )
        _ip(
            "-n",
            netns,
            "-batch",
            "-",
            stdin=(
                f"addr add {ip}/{PREFIX_LENGTH} dev eth0\n"
                "link set eth0 up\nlink set lo up\n"
                f"route add default via {GATEWAY}\n"
            ),
        )
        return slot, ip

    def write_files(self, slot: int, files: dict[str, str]) -> None:
        """/etc files of the pod (hosts, resolv.conf), mounted by ``ip netns exec``."""
        directory = f"/etc/netns/{self.netns(slot)}"
        os.makedirs(directory, exist_ok=True)
        for name, text in files.items():
            with open(f"{directory}/{name}", "w") as f:
                f.write(text)

    def destroy(self, slot: int) -> None:
        netns = self.netns(slot)
        for pid in _ip("netns", "pids", netns, check=False).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        _ip("netns", "del", netns, check=False)  # its veth goes with it
        shutil.rmtree(f"/etc/netns/{netns}", ignore_errors=True)
        with self.lock:
            self.used.discard(slot)
