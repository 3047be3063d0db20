"""Imports flow one way: flux <- spec <- render <- cluster <- cli, and the
pure layers never import a Kubernetes client (import-linter contracts in
pyproject.toml, checked the way kopf checks its own)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conformance import REPO


def test_import_contracts_hold():
    lint = shutil.which("lint-imports") or str(REPO / ".venv" / "bin" / "lint-imports")
    result = subprocess.run(
        [lint, "--config", str(REPO / "pyproject.toml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": sys.exec_prefix + "/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout
