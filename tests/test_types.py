"""Types as a contract: mypy --strict (pyproject.toml [tool.mypy]) passes with
zero errors on the pure core - the Flux formats, the spec model, rendering,
the workload knowledge and the document reader."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conformance import REPO

PURE = [
    "-p",
    "fluxhop.flux",
    "-p",
    "fluxhop.spec",
    "-p",
    "fluxhop.render",
    "-p",
    "fluxhop.workload",
]
MODULES = [
    "-m",
    "fluxhop.documents",
    "-m",
    "fluxhop.errors",
    "-m",
    "fluxhop.arguments",
    "-m",
    "fluxhop.nesting",
]


@pytest.mark.timeout(600)
def test_mypy_strict_on_the_pure_core(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), *PURE, *MODULES],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
