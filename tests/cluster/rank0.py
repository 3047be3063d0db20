"""Rank 0 of a MiniCluster on the fake API server, as the autoscaling tests
need it: metrics.py's JSON, which the test sets, and the flux commands the
autoscaler runs in its pod (through lightkube's exec, tests/cluster/fakeexec.py)."""

from __future__ import annotations

import copy
import json

from fluxhop.workload.autoscale import DRAIN_REASON
from tests.workload.test_inside import METRICS


def metrics(*, pending: int = 0, allocated: str = "", drained: str = "") -> dict:
    """metrics.py's JSON, in every field fluxhop status checks."""
    drain = [{"ranks": drained, "reason": DRAIN_REASON}] if drained else []
    return {**METRICS, "pending_nodes": pending, "pending_max_nodes": pending, "pending_cores": 0,
            "pending_max_cores": 0, "ranks": {"online": "0", "allocated": allocated,
                                              "drain": drain}}  # fmt: skip


class Rank0:
    """What rank 0 answers: its metrics (set by the test) and exec'd commands."""

    def __init__(self) -> None:
        self.now = metrics()
        self.ran: list[list[str]] = []
        self.scrapes = 0

    def scrape(self, pod: dict, port: int) -> dict:
        assert pod["status"]["podIP"] and port == 9408
        self.scrapes += 1
        return copy.deepcopy(self.now)

    def execute(self, pod: str, container: str, argv: list[str]) -> tuple[int, str, str]:
        flux_args = argv[argv.index("fluxhop") + 2 :]  # bash -c SCRIPT fluxhop FLUX_ROOT ARGS
        self.ran.append(flux_args)
        if flux_args[:1] == ["python"]:  # metrics.py --once --json, by exec
            return 0, json.dumps(self.now) + "\n", ""
        return 0, "", ""
