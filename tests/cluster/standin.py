"""Stand-ins for the inside verbs' tests: a ``kubectl`` on PATH that records
its argv and runs the command after ``--`` on this machine (as if the pod
were here), a recording ``flux`` for control flow, and a real local Flux
instance (where flux-core is installed) for the answers that must be real."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from tests.processes import default_signals

__all__ = ["RealInstance", "install_kubectl", "kubectl_calls", "recording_flux", "write_env"]

KUBECTL = """#!{python}
# stand-in kubectl: record argv, then run `exec ... -- CMD` here; a command
# that fails is followed on stderr by the line real kubectl adds
import json, os, subprocess, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
argv = sys.argv[1:]
if "exec" not in argv or "--" not in argv:
    sys.exit("stand-in kubectl only runs exec")
code = subprocess.call(argv[argv.index("--") + 1:])
if code:
    print(f"command terminated with exit code {{code}}", file=sys.stderr)
sys.exit(code)
"""

FLUX = """#!/bin/sh
# stand-in flux: record argv; submit prints one ID per --cc id
printf '%s\\n' "$*" >> {log}
if [ "$1" = submit ]; then
    n=1
    prev=""
    for a in "$@"; do
        if [ "$prev" = --cc ]; then n=$(( ${{a#*-}} - ${{a%-*}} + 1 )); fi
        prev="$a"
    done
    i=0
    while [ "$i" -lt "$n" ]; do echo "fStandIn$i"; i=$((i + 1)); done
fi
"""


def install_kubectl(bin_dir: Path, log: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "kubectl"
    path.write_text(KUBECTL.format(python=sys.executable, log=str(log)))
    path.chmod(0o755)
    return path


def kubectl_calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def recording_flux(bin_dir: Path, log: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "flux-standin"
    path.write_text(FLUX.format(log=shlex.quote(str(log))))
    path.chmod(0o755)
    return path


def write_env(flux_root: Path, *, flux_bin: str, uri: str = "local:///nonexistent") -> None:
    """What the entrypoint writes once rank 0's broker is up (run/env.sh)."""
    run = flux_root / "run"
    run.mkdir(parents=True, exist_ok=True)
    path = os.environ["PATH"]
    (run / "env.sh").write_text(
        f"export PATH={shlex.quote(path)}\nexport FLUX_URI={shlex.quote(uri)}\n"
        f"flux_bin={shlex.quote(flux_bin)}\n"
    )


class RealInstance:
    """``flux start --test-size=N`` in the background, until stop(); its
    URI is the first line the instance prints (read blocks until then)."""

    def __init__(self, flux: str, size: int) -> None:
        self.process = subprocess.Popen(
            [flux, "start", f"--test-size={size}", "sh", "-c", 'echo "$FLUX_URI"; exec sleep 3600'],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            preexec_fn=default_signals,
        )
        assert self.process.stdout is not None
        self.uri = self.process.stdout.readline().strip()
        if not self.uri:
            self.stop()
            raise RuntimeError(f"flux start exited with {self.process.returncode}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
