"""What each component of the test cluster is started with: flags and
configuration as plain data (pure), for ``LocalCluster`` to run.

Where this differs from a production cluster it says why: everything on
127.0.0.1 but the test cluster's API server and DNS (on the pod network's
gateway, where the real nodes reach them), and node failure noticed in
seconds (``NODE_GRACE``, ``EVICTION_TOLERATION``) so that the fault tests
finish quickly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.realk8s.bridge import GATEWAY
from tests.realk8s.pki import KeyPair

__all__ = [
    "CLUSTER_DOMAIN",
    "CONTROLLERS",
    "EVICTION_TOLERATION",
    "KUBERNETES_SERVICE_IP",
    "NODE_GRACE",
    "SERVICE_RANGE",
    "api_rate_flags",
    "apiserver_flags",
    "audit_flags",
    "controller_manager_flags",
    "coredns_rbac",
    "corefile",
    "etcd_flags",
    "scheduler_flags",
]

# Services in the benchmarking range with the pods (198.18.0.0/15), never a
# private one: kube-proxy routes them on the real nodes. The first address
# is the kubernetes Service's.
SERVICE_RANGE = "198.18.128.0/17"
KUBERNETES_SERVICE_IP = "198.18.128.1"
CLUSTER_DOMAIN = "cluster.local"
NODE_GRACE = 10  # seconds without a Lease renewal before a node is NotReady (40 s by default)
EVICTION_TOLERATION = 10  # seconds a pod stays on a NotReady node (300 s by default)
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "endpointslice-controller",
    "endpoints-controller",
    "serviceaccount-controller",
    "namespace-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "disruption-controller",
    "replicaset-controller",
    "deployment-controller",
    # claims bound to the volumes a test makes (static: no provisioner), and
    # their protection finalizers removed once no pod uses them
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)
# CoreDNS reads Services, EndpointSlices, pods and namespaces (its upstream ClusterRole).
COREDNS_RULES = [
    {
        "apiGroups": [""],
        "resources": ["endpoints", "services", "pods", "namespaces"],
        "verbs": ["list", "watch"],
    },
    {
        "apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"],
        "verbs": ["list", "watch"],
    },
]


def etcd_flags(data_dir: Path, client_url: str, peer_url: str) -> list[str]:
    return [
        f"--data-dir={data_dir}",
        "--name=default",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync",  # a test cluster: its data dies with it
        "--log-level=warn",
    ]


def apiserver_flags(
    etcd_url: str, port: int, pki: Path, ca: Path, serving: KeyPair, address: str = "127.0.0.1"
) -> list[str]:
    """On ``address``: loopback for a control plane alone, the pod network's
    gateway for the test cluster, whose real nodes reach it there (and their
    pods through the kubernetes Service, which kube-proxy routes to it)."""
    return [
        f"--etcd-servers={etcd_url}",
        f"--bind-address={address}",
        f"--secure-port={port}",
        f"--advertise-address={address}",
        # loopback is no valid endpoint address: no kubernetes Service endpoints then
        f"--endpoint-reconciler-type={'none' if address == '127.0.0.1' else 'lease'}",
        f"--service-cluster-ip-range={SERVICE_RANGE}",
        "--allow-privileged=true",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--client-ca-file={ca}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--kubelet-certificate-authority={ca}",
        "--kubelet-preferred-address-types=InternalIP",
        f"--default-not-ready-toleration-seconds={EVICTION_TOLERATION}",
        f"--default-unreachable-toleration-seconds={EVICTION_TOLERATION}",
        "--profiling=false",
    ]


def audit_flags(directory: Path, groups: tuple[str, ...]) -> list[str]:
    """The API server's audit log of every request made by a user in one of
    ``groups`` (at level Metadata: who, verb, resource, when; no bodies), and
    of nothing else; the policy is written to ``directory``. A benchmark
    counts an operator's requests from it (tests/realk8s/audit.py)."""
    if not groups:
        return []
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "userGroups": list(groups)}, {"level": "None"}],
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "audit-policy.json"
    path.write_text(json.dumps(policy))
    return [
        f"--audit-policy-file={path}",
        f"--audit-log-path={directory / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",  # every request in the log when it is answered
    ]


def api_rate_flags(qps: int | None) -> list[str]:
    """A control-plane client's rate limit: ``qps`` requests a second, bursts
    of twice that; None keeps Kubernetes' defaults (the controller manager
    20/30, the scheduler 50/100), what a cluster runs unless told."""
    return [] if qps is None else [f"--kube-api-qps={qps}", f"--kube-api-burst={2 * qps}"]


def controller_manager_flags(
    kubeconfig: Path, ca: Path, sa_key: Path, port: int, qps: int | None = None
) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--use-service-account-credentials=true",  # each controller with its own RBAC
        f"--root-ca-file={ca}",
        f"--service-account-private-key-file={sa_key}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--controllers={','.join(CONTROLLERS)}",
        f"--node-monitor-grace-period={NODE_GRACE}s",
        "--node-monitor-period=1s",
        "--concurrent-job-syncs=5",
        *api_rate_flags(qps),
    ]


def scheduler_flags(kubeconfig: Path, port: int, qps: int | None = None) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        *api_rate_flags(qps),
    ]


def corefile(kubeconfig: Path, ready_port: int, address: str = GATEWAY) -> str:
    """CoreDNS on ``address`` of the pod network's bridge (its gateway),
    answering for the cluster's domain from the API (no forwarding: other
    names fail at once)."""
    return (
        f"{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{\n"
        f"    bind {address}\n    errors\n    ready 127.0.0.1:{ready_port}\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig}\n        pods insecure\n"
        "        fallthrough in-addr.arpa ip6.arpa\n    }\n}\n"
        f".:53 {{\n    bind {address}\n    errors\n}}\n"
    )


def coredns_rbac(user: str) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object): CoreDNS's ClusterRole, bound to ``user``."""
    group = "rbac.authorization.k8s.io"
    return [
        (f"/apis/{group}/v1/clusterroles", {"metadata": {"name": user}, "rules": COREDNS_RULES}),
        (
            f"/apis/{group}/v1/clusterrolebindings",
            {
                "metadata": {"name": user},
                "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": user},
                "subjects": [{"apiGroup": group, "kind": "User", "name": user}],
            },
        ),
    ]
