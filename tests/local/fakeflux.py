"""A stand-in ``flux`` on PATH for the local backend's process tests.

It is the pod simulation's recording ``flux`` (tests/render/podsim.py) in its
"one instance" mode: brokers join through files, rank 0 runs its program
once all have joined, the others leave when it is done. It controls the flow
only; whether a real Flux accepts the files is the ``flux``-marked test's job.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from fluxhop.spec.flags import minicluster_from_flags
from tests.render.podsim import FAKE_FLUX


class FakeFlux:
    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        flux = self.bin / "flux"
        flux.write_text(FAKE_FLUX)
        flux.chmod(0o755)
        self.record = root / "flux-calls.jsonl"
        self.join = root / "join"
        self.join.mkdir()
        self.monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{self.bin}:/usr/bin:/bin")
        monkeypatch.setenv("FLUX_RECORD", str(self.record))
        monkeypatch.setenv("FAKE_JOIN_DIR", str(self.join))
        # run directories under a short path: broker socket paths are limited
        self.tmp = Path(tempfile.mkdtemp(prefix="fh-", dir="/tmp"))
        monkeypatch.setenv("TMPDIR", str(self.tmp))

    def set(self, **env: str | int) -> None:
        for key, value in env.items():
            self.monkeypatch.setenv(key, str(value))

    def calls(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def starts(self) -> list[dict]:
        return [c for c in self.calls() if c["argv"][0] == "start" and "event" not in c]

    def all_gone(self) -> bool:
        """No process the fake recorded is alive."""
        for call in self.calls():
            try:
                os.kill(call["pid"], 0)
            except ProcessLookupError:
                continue
            if Path(f"/proc/{call['pid']}/status").read_text().find("State:\tZ") < 0:
                return False
        return True


@pytest.fixture
def fake_flux(tmp_path, monkeypatch) -> FakeFlux:
    fake = FakeFlux(tmp_path, monkeypatch)
    yield fake
    shutil.rmtree(fake.tmp, ignore_errors=True)


def job(command, *, nodes=3, tasks=None, name="demo"):
    return minicluster_from_flags(list(command), image="local", nodes=nodes, tasks=tasks, name=name)
