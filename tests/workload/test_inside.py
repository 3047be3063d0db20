"""Reading what ``flux resource status``, ``flux resource list`` and ``flux
queue status`` print inside the instance (the text of flux-core 0.88), and
what metrics.py --once --json prints after them (or does not)."""

from __future__ import annotations

import json

import pytest

from fluxhop.errors import InputError
from fluxhop.workload.inside import (
    _METRICS_FAILED,
    _SECTION,
    STATUS_SCRIPT,
    in_pod,
    parse_metrics,
    parse_status,
    status_args,
)

# A MiniCluster of 2 pods with room for 3: rank 2's broker has not started,
# and flux marks the state of an offline broker with "*".
STATUS = f"""avail 2 0-1 work-[0-1]
avail* 1 2 work-2
{_SECTION}
free 2 4 0 0-1 work-[0-1]
allocated 0 0 0
down 1 2 0 2 work-2
{_SECTION}
Job submission is enabled
Scheduling is started
"""


def test_an_offline_broker_is_down_whatever_its_state():
    status = parse_status(STATUS)
    assert [(b.rank, b.node, b.up) for b in status.brokers] == [
        (0, "work-0", True),
        (1, "work-1", True),
        (2, "work-2", False),
    ]
    assert (status.up, status.down) == (2, 1)
    assert status.to_dict()["brokers"] == {"up": 2, "down": 1}


@pytest.mark.parametrize("state", ["drained*", "exclude", "torpid*", "offline"])
def test_states_that_are_not_up(state):
    text = STATUS.replace("avail* 1 2 work-2", f"{state} 1 2 work-2")
    assert parse_status(text).down == 1


def test_resources_and_queue():
    status = parse_status(STATUS)
    assert status.resources["free"] == {"nodes": 2, "cores": 4, "gpus": 0, "ranks": "0-1"}
    assert status.resources["down"]["ranks"] == "2"
    assert status.queue == ["Job submission is enabled", "Scheduling is started"]


def test_an_incomplete_answer_is_one_line():
    with pytest.raises(InputError, match="incomplete"):
        parse_status("avail 1 0 x\n")


# --- metrics.py's numbers, the status' fourth section ------------------------------------

METRICS = {
    "brokers": {"online": 2, "offline": 1, "lost": 0},
    "brokers_torpid": 0,
    "nodes": {"free": 1, "allocated": 1, "down": 1},
    "cores": {"free": 2, "allocated": 2, "down": 2},
    "gpus": {"free": 0, "allocated": 0, "down": 0},
    "nodes_drain": {"drained": 0, "draining": 0},
    "jobs": {"depend": 0, "priority": 0, "sched": 2, "run": 1, "cleanup": 0, "inactive": 5},
    "queue_jobs": {},
    "jobs_result": {"completed": 4, "failed": 1, "canceled": 0, "timeout": 0},
    "jobs_held": 1,
    "pending_nodes": 2,
    "pending_cores": 2,
    "pending_gpus": 0,
    "pending_max_nodes": 2,
    "pending_max_cores": 2,
}
GOOD = json.dumps(METRICS, sort_keys=True)


def _without(key: str) -> str:
    return json.dumps({k: v for k, v in METRICS.items() if k != key})


def _with(key: str, value: object) -> str:
    return json.dumps({**METRICS, key: value})


@pytest.mark.parametrize(
    ("section", "metrics", "error"),
    [
        # no metrics.py in the MiniCluster (made before it, Flux Operator pods): nothing said
        ("", None, None),
        ("\n\n", None, None),
        (GOOD + "\n", METRICS, None),
        # a warning on its stderr before the JSON; keys a later metrics.py adds
        (
            f"WARNING: slow\n{_with('ranks', {'online': '0-1'})}\n",
            {**METRICS, "ranks": {"online": "0-1"}},
            None,
        ),
        (
            f"{_with('queue_jobs', {'batch': METRICS['jobs']})}\n",
            {**METRICS, "queue_jobs": {"batch": METRICS["jobs"]}},
            None,
        ),
        # metrics.py failed: its one line, then the exit status the script adds
        (
            f"reading flux failed: OSError: [Errno 111] Connection refused\n{_METRICS_FAILED} 1\n",
            None,
            "reading flux failed: OSError: [Errno 111] Connection refused",
        ),
        (
            'Traceback (most recent call last):\n  File "metrics.py", line 30\n'
            f"ModuleNotFoundError: No module named 'flux'\n{_METRICS_FAILED} 1\n",
            None,
            "ModuleNotFoundError: No module named 'flux'",
        ),
        (f"{_METRICS_FAILED} 127\n", None, "metrics.py exited with status 127"),
        # an answer that is not the numbers
        (
            "usage: metrics.py [-h]\n",
            None,
            "metrics.py printed no JSON object: usage: metrics.py [-h]",
        ),
        ('{"brokers": {"online": 2\n', None, "metrics.py printed malformed JSON"),
        ("[1, 2]\n", None, "metrics.py printed no JSON object: [1, 2]"),
        ('{"brokers": 3}\n', None, "metrics.py answered without a map brokers"),
        (_without("pending_nodes"), None, "metrics.py answered without a count pending_nodes"),
        (_with("jobs", {**METRICS["jobs"], "run": -1}), None, "without a count jobs.run"),
        (_with("jobs_held", True), None, "without a count jobs_held"),
        (_with("nodes", {"free": "1"}), None, "without a count nodes.free"),
        (_with("queue_jobs", {"batch": {"run": 1}}), None, "the counts of queue_jobs.batch"),
        (_without("queue_jobs"), None, "without a map queue_jobs"),
    ],
)
def test_the_metrics_section(section, metrics, error):
    status = parse_status(f"{STATUS}{_SECTION}\n{section}")
    assert status.metrics == metrics
    if error is None:
        assert status.metrics_error is None
    else:
        assert status.metrics_error is not None and error in status.metrics_error
        assert "\n" not in status.metrics_error
    assert status.to_dict()["metrics"] == metrics
    assert status.to_dict()["metrics_error"] == status.metrics_error
    # the rest of the status is there either way
    assert (status.up, status.down) == (2, 1) and status.queue


def test_a_long_failure_is_one_short_line():
    metrics, error = parse_metrics("x" * 1000 + f"\n{_METRICS_FAILED} 1\n")
    assert metrics is None and error is not None and len(error) <= 200


def test_three_sections_are_a_status_without_metrics():
    status = parse_status(STATUS)
    assert (status.metrics, status.metrics_error) == (None, None)
    assert status.to_dict()["metrics"] is None


def test_the_status_script_runs_metrics_only_when_named():
    assert status_args(None) == []
    assert status_args("") == []
    assert status_args("/etc/fluxhop/metrics.py") == ["/etc/fluxhop/metrics.py"]
    argv = in_pod("/mnt/flux", status_args("/etc/fluxhop/metrics.py"), script=STATUS_SCRIPT)
    assert argv[-2:] == ["/mnt/flux", "/etc/fluxhop/metrics.py"]  # $1 after the prelude's shift
    assert STATUS_SCRIPT.count(_SECTION) == 3
    assert '"$flux_bin" python "$1" --once --json' in STATUS_SCRIPT
