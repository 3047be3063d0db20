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


def test_the_contributing_guide_names_every_layer():
    """CONTRIBUTING.md's table of layers cannot drift from the contract."""
    import re
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    layers = config["tool"]["importlinter"]["contracts"][0]["layers"]
    packages = {name for layer in layers for name in re.findall(r"fluxhop\.\w+", layer)}
    guide = (REPO / "CONTRIBUTING.md").read_text()
    missing = sorted(p for p in packages if f"`{p}`" not in guide)
    assert not missing, f"CONTRIBUTING.md does not describe {missing}"
    on_disk = {
        f"fluxhop.{p.name}"
        for p in (REPO / "src" / "fluxhop").iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    }
    assert on_disk <= packages | {"fluxhop.cli"}, (
        f"packages outside the layers: {on_disk - packages}"
    )
