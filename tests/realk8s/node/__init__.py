"""The test cluster's real nodes: a kubelet of the control plane's
release, a containerd of its own and runc per node, pods on a CNI bridge,
kube-proxy for the ClusterIPs (``node.py``), configured as ``config.py``
says, and what they change on the machine put back (``host.py``)."""

# What the real nodes need of Debian: runc's seccomp (cgo, libseccomp), the
# images' root filesystems (mmdebstrap), kube-proxy's and the CNI plugins'
# packet filter (iptables, conntrack), nsenter (util-linux, essential), the
# operator's image from its Dockerfile (buildah: no daemon).
DEBIAN_PACKAGES = ["libseccomp-dev", "mmdebstrap", "iptables", "conntrack", "buildah"]
