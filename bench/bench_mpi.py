"""Benchmark MPI across the pods of a MiniCluster (plain script; prints numbers).

    sudo .venv/bin/python bench/bench_mpi.py [--runs 1]

Needs root, the built test cluster and images (python -m tests.build) and
Debian's MPICH and Open MPI. Runs tests/realk8s/mpi/matrix.c (4 pods x 2
ranks, in MPI_IMAGE: /usr/local/bin/matrix-<flavour>) with each MPI, with
all pods on one real node and two on each, first as fluxhop renders it
(no transport variable), then with the transport forced to TCP the way the
issue's first workaround did (MPICH: UCX_TLS=tcp,self; Open MPI:
OMPI_MCA_btl=self,tcp), and prints the 4 MiB ping-pong bandwidth between two
ranks of one pod and two ranks of different pods, and forced / default.
The ratios are what the choice to set nothing is about; the machine is
noisy, so compare numbers of one run only.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realflux import flux_prefix, missing_flux
from tests.realk8s.binaries import bin_dir
from tests.realk8s.cluster import LocalCluster, missing_cluster
from tests.realk8s.images.build import MPI_IMAGE
from tests.realk8s.mpi import FLAVOURS, read
from tests.realk8s.placing import REAL_NODES
from tests.realk8s.tools import FLUXHOP, command_env, output

LAYOUTS = {
    "one node": ["--node-selector", "kubernetes.io/hostname=node-r0"],
    "two per node": ["--pods-per-node", "2"],
}
FORCED = {"mpich": "UCX_TLS=tcp,self", "openmpi": "OMPI_MCA_btl=self,tcp"}


def bandwidth(
    cluster: LocalCluster, program: Path, layout: list[str], env: list[str]
) -> dict[str, float]:
    """One run: MB/s of the same-pod and other-pod ping-pongs."""
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    with cluster.admin() as api:
        api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        try:
            done = subprocess.run(
                [str(FLUXHOP), "run", "--namespace", namespace, "--flux-in-image", "--image", MPI_IMAGE,
                 "-N", "4", "-n", "8", "-t", "45s", *layout, *env, "--", str(program)],
                env=command_env(cluster), capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        finally:
            api.delete(f"/api/v1/namespaces/{namespace}")
    result = read(output(done.stdout))
    if not result.checks_ok:
        raise SystemExit(f"the MPI run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return {what: rate for what, (_, _, rate) in result.p2p.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    reason = missing_cluster() or missing_flux()
    reason = reason or next((f.missing() for f in FLAVOURS.values() if f.missing()), None)
    if reason:
        raise SystemExit(f"bench_mpi: {reason}")
    programs = {name: Path(f"/usr/local/bin/matrix-{name}") for name in FLAVOURS}  # in MPI_IMAGE
    cluster = LocalCluster(bin_dir() or Path(), REAL_NODES, flux_prefix=flux_prefix())
    cluster.start()
    try:
        print(f"4 MiB ping-pong, MB/s per direction (median of {args.runs}); forced / default")
        for name, program in programs.items():
            for layout, flags in LAYOUTS.items():
                rates = {}
                for variant, env in (("default", []), ("forced", ["--env", FORCED[name]])):
                    runs = [bandwidth(cluster, program, flags, env) for _ in range(args.runs)]
                    rates[variant] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                for pair in ("same-pod", "other-pod"):
                    default, forced = rates["default"][pair], rates["forced"][pair]
                    print(f"  {name:<8} {layout:<13} {pair:<10} default {default:8.1f}  "
                          f"{FORCED[name]:<22} {forced:8.1f}  {forced / default:5.2f}")  # fmt: skip
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
