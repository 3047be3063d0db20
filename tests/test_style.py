"""The code stays ruff clean (lint and format), checked like any other test."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conformance import REPO

RUFF = shutil.which("ruff") or f"{sys.exec_prefix}/bin/ruff"
PATHS = ["src", "tests", "bench"]


def test_ruff_check():
    # --no-cache: a cached "clean" for an unchanged file hides an import of a
    # module that has since gone (a fresh clone then fails where this passed)
    result = subprocess.run(
        [RUFF, "check", "--no-cache", *PATHS], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = subprocess.run(
        [RUFF, "format", "--check", *PATHS], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
