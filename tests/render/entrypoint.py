"""What the rendered entrypoint says, read back for tests."""

from __future__ import annotations

import shlex
from typing import Any


def config_data(objects: list[dict[str, Any]]) -> dict[str, str]:
    return next(o for o in objects if o["kind"] == "ConfigMap")["data"]


def run_flags(objects: list[dict[str, Any]]) -> list[str]:
    """flux_run_args=(...) of the rendered entrypoint, as words."""
    line = next(
        line
        for line in config_data(objects)["entrypoint.sh"].splitlines()
        if line.startswith("flux_run_args=(")
    )
    return shlex.split(line[len("flux_run_args=(") : -1])
