"""What a real node's programs are started with: containerd's, the CNI
network's, the kubelet's and kube-proxy's configuration as plain data
(pure), for ``node.py`` to write and run.

Every node has its own containerd (own root, state and socket: a kubelet
treats pods its runtime holds but it does not know as orphans), its own
cgroup root (``/fhk8s/<node>``: a kubelet removes pod cgroups under its
root that are not its pods'), its own network namespace and pod range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CLUSTER_CIDR",
    "MIRRORED_HOSTS",
    "NodeAddresses",
    "cni_conflist",
    "containerd_config",
    "hosts_toml",
    "kube_proxy_config",
    "kubelet_config",
]

# Real nodes' pods: node k hands out 198.18.<k+1>.0/24 (host-local IPAM);
# the Services (components.SERVICE_RANGE) are 198.18.128.0/17 above them.
CLUSTER_CIDR = "198.18.0.0/17"
# The node's own address on the test cluster's bridge (tests/realk8s/bridge.py)
NODE_SUBNET = "198.19.254"
# Registries whose names the nodes resolve to the test cluster's registry
# (each under /v2/<host>/ there); any other host goes to _default, where
# nothing is, so a pull of an unknown image fails at once in the
# registry's words.
MIRRORED_HOSTS = ("docker.io", "ghcr.io", "registry.k8s.io", "quay.io", "nvcr.io")


@dataclass(frozen=True)
class NodeAddresses:
    """Node ``index``'s addresses: its own on the bridge, its pods' range."""

    index: int

    @property
    def node_ip(self) -> str:
        return f"{NODE_SUBNET}.{self.index + 1}"

    @property
    def pod_cidr(self) -> str:
        return f"198.18.{self.index + 1}.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"198.18.{self.index + 1}.1"


def containerd_config(root: Path, bin_dir: Path, pause_image: str) -> str:
    """containerd v2 (config version 3) for one node, under ``root``."""
    runtime = "io.containerd.cri.v1.runtime"
    images = "io.containerd.cri.v1.images"
    return f"""version = 3
root = "{root}/lib"
state = "{root}/run"

[grpc]
  address = "{root}/containerd.sock"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.grpc.v1.cri"]
  # the streaming server (exec, attach, port-forward) the kubelet proxies,
  # on the node's own loopback (its network namespace)
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."{runtime}"]
  enable_selinux = false
  # the pods' network namespaces under the node's own state, not /run/netns
  netns_mounts_under_state_dir = true
  # root here lacks CAP_SYS_RESOURCE: runc cannot lower the sandbox's
  # oom_score_adj (-998) and every sandbox fails without this
  restrict_oom_score_adj = true
  [plugins."{runtime}".cni]
    bin_dirs = ["{bin_dir}/cni"]
    conf_dir = "{root}/cni/net.d"
  [plugins."{runtime}".containerd]
    default_runtime_name = "runc"
    [plugins."{runtime}".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."{runtime}".containerd.runtimes.runc.options]
        BinaryName = "{bin_dir}/runc"
        Root = "{root}/runc"
        SystemdCgroup = false

[plugins."{images}"]
  snapshotter = "overlayfs"
  [plugins."{images}".pinned_images]
    sandbox = "{pause_image}"
  [plugins."{images}".registry]
    config_path = "{root}/certs.d"
"""


def hosts_toml(registry: str, host: str | None) -> str:
    """containerd's hosts.toml for ``host`` (None: _default): pulls go to the
    test cluster's registry (``http://ADDRESS``), under ``/v2/<host>``, and
    nowhere else."""
    path = host or "_unknown"
    return (
        f'server = "{registry}/v2/{path}"\n\n'
        f'[host."{registry}/v2/{path}"]\n'
        '  capabilities = ["pull", "resolve"]\n'
        "  override_path = true\n"
    )


def cni_conflist(addresses: NodeAddresses, data_dir: Path) -> dict[str, Any]:
    """The pods' network on one node: the CNI bridge in the node's network
    namespace, an address from the node's range, hostPorts by portmap."""
    return {
        "cniVersion": "1.0.0",
        "name": "fhk8s",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(data_dir),
                    "ranges": [[{"subnet": addresses.pod_cidr, "gateway": addresses.pod_gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(
    *,
    address: str,
    ca: Path,
    serving: tuple[Path, Path],
    runtime_socket: Path,
    cgroup_root: str,
    dns: str,
    cluster_domain: str,
    resolv_conf: Path,
    logs: Path,
    taints: list[dict[str, str]],
) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": address,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",  # the node's own loopback
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(serving[0]),
        "tlsPrivateKeyFile": str(serving[1]),
        "containerRuntimeEndpoint": f"unix://{runtime_socket}",
        # this VM mounts cgroup v1 (cgroup2 beside it): v1.36 refuses v1 unless told
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "failSwapOn": False,
        "clusterDNS": [dns],
        "clusterDomain": cluster_domain,
        "resolvConf": str(resolv_conf),
        "podLogsDir": str(logs),
        "registerWithTaints": taints,
        "serializeImagePulls": False,
        # the test cluster notices a lost node in 10 s (components.NODE_GRACE):
        # renew the Lease every 2 s, not every 10
        "nodeLeaseDurationSeconds": 8,
        "nodeStatusUpdateFrequency": "2s",
        # a shared disk and memory: never evict for the host's own use
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # protectKernelDefaults false (the default): the kubelet sets
        # vm.overcommit_memory and kernel.panic*; node.py puts them back
        "protectKernelDefaults": False,
        "shutdownGracePeriod": "0s",
    }
    return yaml.safe_dump(config)


def kube_proxy_config(*, kubeconfig: Path, node: str, health_port: int) -> str:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node,
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
        "bindAddress": "0.0.0.0",
        "healthzBindAddress": f"127.0.0.1:{health_port}",
        "metricsBindAddress": "127.0.0.1:10249",  # the node's own loopback
        # leave the machine's conntrack settings as they are
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config)
