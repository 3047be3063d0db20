"""What `fluxhop status` shows a person (cli/inside.py): the brokers,
resources and queue, then metrics.py's numbers as a short block - or one
line when they could not be read, and nothing when the MiniCluster has no
metrics.py (made before it, or a Flux Operator pod)."""

from __future__ import annotations

import pytest

from fluxhop.cli.inside import metrics_block, status_table
from fluxhop.workload.inside import Broker, InstanceStatus
from tests.workload.test_inside import METRICS

JOBS = {"depend": 1, "priority": 0, "sched": 2, "run": 1, "cleanup": 0, "inactive": 5}


def status(**fields) -> InstanceStatus:
    return InstanceStatus(
        brokers=[Broker(0, "demo-0", "avail"), Broker(1, "demo-1", "avail")],
        resources={"free": {"nodes": 1, "cores": 2, "gpus": 0, "ranks": "1"}},
        queue=["Job submission is enabled"],
        **fields,
    )


BASE = (
    "brokers: 2 up, 0 down\n"
    "RANK  NODE    STATE\n"
    "0     demo-0  avail\n"
    "1     demo-1  avail\n"
    "RESOURCES  NODES  CORES  GPUS  RANKS\n"
    "free       1      2      0     1\n"
    "Job submission is enabled\n"
)


@pytest.mark.parametrize(
    ("fields", "tail"),
    [
        ({}, ""),  # no metrics.py: nothing about metrics, nothing alarming
        (
            {"metrics_error": "reading flux failed: OSError: boom"},
            "metrics: unavailable (reading flux failed: OSError: boom)\n",
        ),
        (
            {"metrics": METRICS},
            "metrics:\n"
            "  jobs     2 pending (1 held), 1 running, 0 cleanup, 5 inactive\n"
            "  pending  2 nodes, 2 cores, 0 GPUs asked for; the largest ask 2 nodes, 2 cores\n"
            "  nodes    1 free, 1 allocated, 1 down; 0 drained, 0 draining\n"
            "  brokers  2 online, 1 offline, 0 lost\n"
            "  results  4 completed, 1 failed, 0 canceled, 0 timeout\n",
        ),
    ],
)
def test_the_status_table(fields, tail):
    assert status_table(status(**fields)) == BASE + tail


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"jobs_held": 0}, "  jobs         2 pending, 1 running, 0 cleanup, 5 inactive"),
        (
            {"jobs": JOBS, "jobs_held": 3},
            "  jobs         3 pending (3 held), 1 running, 0 cleanup, 5 inactive",
        ),
        (
            {"queue_jobs": {"debug": JOBS, "batch": METRICS["jobs"]}},
            "  queue batch  2 pending, 1 running, 0 cleanup, 5 inactive\n"
            "  queue debug  3 pending, 1 running, 0 cleanup, 5 inactive",
        ),
        (
            {"nodes_drain": {"drained": 1, "draining": 2}},
            "  nodes        1 free, 1 allocated, 1 down; 1 drained, 2 draining",
        ),
        (
            {"brokers": {"online": 3, "offline": 0, "lost": 1}},
            "  brokers      3 online, 0 offline, 1 lost",
        ),
        (
            {"health_checks": {"gpus": {"pass": 2, "fail": 2}, "disk": {"pass": 4, "fail": 0}},
             "health": {"gpus": {"failing": "1,3", "line": "3 of 4 GPUs present" + " x" * 40}}},
            "  health disk  4 passing, 0 failing\n"
            "  health gpus  2 passing, 2 failing (ranks 1,3: 3 of 4 GPUs present x x x x x x x x x...)",
        ),
        (
            {"nodes_drain_by_reason": {"drained": {"health": 1, "autoscale": 0, "other": 1},
                                       "draining": {"health": 1, "autoscale": 2, "other": 0}}},
            "  drained by   2 health, 2 autoscale, 1 other",
        ),
    ],
)  # fmt: skip
def test_the_metrics_block_lines(change, line):
    # with queue lines the label column widens ("  queue batch"): compare with it
    metrics = {**METRICS, "queue_jobs": {"batch": METRICS["jobs"]}, **change}
    block = metrics_block(metrics)
    assert block.startswith("metrics:\n")
    assert line in block, block
    assert all(len(text) < 100 for text in block.splitlines())
