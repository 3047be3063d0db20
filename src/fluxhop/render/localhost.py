"""A MiniCluster's bundle for N brokers on this one host (the local backend).

The same bundle as for Kubernetes, with only what must differ on one host
rewritten:

* one ``hosts`` entry per rank, each with its own ``bind``/``connect`` on
  127.0.0.1 and a free port (there is no DNS name per rank here), under a
  host name the broker is told with ``-Shostname=`` (flux-core 0.82+);
* the Flux view is off: the ``flux`` on PATH runs the brokers;
* ``[resource] noverify``: every rank really runs on the same machine, and
  Flux would otherwise drain ranks whose hostname differs from R's nodelist;
* the certificate, R and the scripts live under one run directory, and each
  rank gets its own rundir/statedir (so rank N's socket is ``local-N`` there).

Pure: the ports and the directory are inputs, never looked up here.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from fluxhop.errors import FluxhopWarning, SpecError
from fluxhop.flux.broker import HostEntry
from fluxhop.flux.curve import CurveCert
from fluxhop.render.bundle import Bundle, Layout, build_bundle
from fluxhop.render.scripts import PodPaths
from fluxhop.spec.minicluster import MiniCluster

__all__ = ["LOOPBACK", "LocalLayout", "local_bundle"]

LOOPBACK = "127.0.0.1"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS; keep a margin


@dataclass(frozen=True)
class LocalLayout:
    """Where one local MiniCluster lives: ``root/config``, ``root/curve``,
    and ``root/rank-N`` as rank N's Flux root."""

    root: str
    name: str
    size: int

    @property
    def paths(self) -> PodPaths:
        return PodPaths(config_dir=f"{self.root}/config", curve_dir=f"{self.root}/curve")

    @property
    def cert_path(self) -> str:
        return f"{self.root}/curve/curve.cert"

    def host(self, rank: int) -> str:
        return f"{self.name}-{rank}"

    def flux_root(self, rank: int) -> str:
        return f"{self.root}/rank-{rank}"

    def rundir(self, rank: int) -> str:
        return f"{self.flux_root(rank)}/run/broker"

    def uri(self, rank: int = 0) -> str:
        """The broker's default local-uri: ``local://<rundir>/local-<rank>``."""
        return f"local://{self.rundir(rank)}/local-{rank}"


def _cores_per_rank(spec: MiniCluster) -> int:
    """Cores R gives each rank: the declared CPUs, or enough for the tasks."""
    body = spec.spec
    declared = body.flux_container.resources.cpu()
    if declared is not None:
        return max(1, math.floor(declared))
    return max(1, math.ceil(body.ntasks / body.size)) if body.ntasks else 1


def local_spec(spec: MiniCluster) -> MiniCluster:
    """The spec as run locally: Flux from PATH, exactly ``size`` brokers, no
    metrics port (there are no pods to scrape; ``fluxhop status`` reads the
    same numbers)."""
    local = spec.model_copy(deep=True)
    local.spec.flux.container.disable = True
    local.spec.metrics.enabled = False
    local.spec.max_size = None
    local.spec.min_size = None
    if local.spec.lead_state is not None:
        warnings.warn(
            "spec.leadState does not apply to a local MiniCluster: its brokers are processes "
            "on this machine, not pods a Job makes again; rank 0 keeps no state",
            FluxhopWarning,
            stacklevel=2,
        )
        local.spec.lead_state = None
    local._operator_extras = []
    return local


def local_bundle(
    spec: MiniCluster, layout: LocalLayout, ports: Sequence[int], cert: CurveCert
) -> Bundle:
    """The bundle for ``spec`` as ``layout.size`` brokers on 127.0.0.1:``ports``."""
    if len(ports) != layout.size:
        raise SpecError(f"need one port per rank: {layout.size} ranks, {len(ports)} ports")
    longest = layout.uri(layout.size - 1).removeprefix("local://")
    if len(longest.encode()) > MAX_SOCKET_PATH:
        raise SpecError(
            f"the broker socket path {longest!r} is longer than {MAX_SOCKET_PATH} bytes; "
            "use a shorter run directory (TMPDIR) or name"
        )
    local = local_spec(spec)
    hosts = Layout(f"{layout.name}-", layout.name, local.namespace)
    bundle = build_bundle(
        local, hosts, cert, paths=layout.paths, cores_per_node=_cores_per_rank(local)
    )
    entries = [
        HostEntry(
            layout.host(rank), bind=f"tcp://{LOOPBACK}:{port}", connect=f"tcp://{LOOPBACK}:{port}"
        )
        for rank, port in enumerate(ports)
    ]
    broker = dataclasses.replace(
        bundle.broker,
        hosts=entries,
        compact=False,
        default_port=None,
        default_bind=None,
        default_connect=None,
        curve_cert=layout.cert_path,
        resource_noverify=True,
        resource_verify=None,
    )
    files = dict(bundle.config_files)
    files["broker.toml"] = broker.to_toml()
    # No kubelet here to turn the $$ of Kubernetes-escaped args back into $.
    argv = [word.replace("$$", "$") for word in bundle.container_args]
    return dataclasses.replace(bundle, broker=broker, config_files=files, container_args=argv)
