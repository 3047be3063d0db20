"""Reading what ``flux resource status``, ``flux resource list`` and ``flux
queue status`` print inside the instance (the text of flux-core 0.88)."""

from __future__ import annotations

import pytest

from fluxhop.errors import InputError
from fluxhop.workload.inside import _SECTION, parse_status

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
