"""The MPI matrix's program (matrix.c), built with each MPI flavour's own
compiler wrapper from Debian's packages, where the pods of the test cluster
see it (the host filesystem is their image; their /tmp is their own), and
what its output says."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.realk8s.cleanup import RUN_DIR

__all__ = ["BUILD_DIR", "FLAVOURS", "Flavour", "Result", "build", "read"]

SOURCE = Path(__file__).with_name("matrix.c")
BUILD_DIR = RUN_DIR / "mpi"


@dataclass(frozen=True)
class Flavour:
    name: str
    compiler: str
    packages: str  # what Debian installs it from

    def missing(self) -> str | None:
        if shutil.which(self.compiler) is None:
            return f"{self.name} is not installed (apt-get install {self.packages})"
        return None


FLAVOURS = {
    "mpich": Flavour("mpich", "mpicc.mpich", "mpich libmpich-dev"),
    "openmpi": Flavour("openmpi", "mpicc.openmpi", "openmpi-bin libopenmpi-dev"),
}


def build(flavour: Flavour, directory: Path = BUILD_DIR) -> Path:
    """matrix.c compiled by ``flavour``'s wrapper into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / f"matrix-{flavour.name}"
    subprocess.run(
        [flavour.compiler, "-O2", "-o", str(binary), str(SOURCE)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return binary


P2P = re.compile(r"^p2p (same-pod|other-pod) 0-(\d+) (ok|BAD) ([\d.]+) MB/s$")


@dataclass
class Result:
    """What one run of the program printed (broker log lines left out)."""

    hosts: dict[int, str]  # MPI rank -> the pod it ran in
    world: int | None
    allreduce_ok: bool
    p2p: dict[str, tuple[int, bool, float]]  # same-pod/other-pod -> (peer, ok, MB/s)
    checks_ok: bool
    library: str
    finalized: bool


def read(lines: list[str]) -> Result:
    hosts: dict[int, str] = {}
    result = Result(hosts, None, False, {}, False, "", False)
    for line in lines:
        if m := re.match(r"^rank (\d+) of (\d+) on (\S+)$", line):
            hosts[int(m[1])] = m[3]
        elif m := re.match(r"^allreduce (ok|BAD) ", line):
            result.allreduce_ok = m[1] == "ok"
        elif m := P2P.match(line):
            result.p2p[m[1]] = (int(m[2]), m[3] == "ok", float(m[4]))
        elif m := re.match(r"^world (\d+) (ok|BAD); (.*)$", line):
            result.world, result.checks_ok, result.library = int(m[1]), m[2] == "ok", m[3]
        elif line == "finalized":
            result.finalized = True
    return result
