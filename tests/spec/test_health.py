"""spec.health (a fluxhop extension): what a spec may ask, and one line for
what it may not."""

from __future__ import annotations

import pytest

from fluxhop.errors import InputError, SpecError
from fluxhop.spec import MiniCluster
from fluxhop.spec.placement import Placement, place
from tests.documents import minicluster_doc


def doc(health):
    container = {"image": "ubuntu:noble", "command": "true"}
    return minicluster_doc("hc", size=2, containers=[container], health=health)


def test_defaults():
    health = MiniCluster.from_dict(doc({"checks": [{"name": "a", "command": "true"}]})).spec.health
    assert health is not None and health.on_failure == "drain"
    (check,) = health.checks
    assert (check.kind, check.interval_seconds, check.timeout_seconds) == ("passive", 60, 10)


def test_replace_needs_a_rank_besides_rank_0():
    check = {"name": "a", "command": "true"}
    one = minicluster_doc("hc", size=1, containers=[{"image": "x", "command": "true"}],
                          health={"onFailure": "replace", "checks": [check]})  # fmt: skip
    with pytest.raises(SpecError) as caught:
        MiniCluster.from_dict(one)
    assert str(caught.value) == (
        "spec: health.onFailure replace needs size 2 or more (rank 0 is never replaced)"
    )
    health = MiniCluster.from_dict(doc({"onFailure": "replace", "checks": [check]})).spec.health
    assert health is not None and (health.on_failure, health.max_replacements) == ("replace", 1)


def test_an_active_check():
    check = {"name": "allreduce", "command": "all_reduce_perf", "kind": "active"}
    health = MiniCluster.from_dict(doc({"checks": [check]})).spec.health
    assert health is not None and health.checks[0].kind == "active"


@pytest.mark.parametrize(
    ("health", "says"),
    [
        ({"checks": [{"name": "a"}]}, "spec.health.checks[0].command: is required"),
        ({"checks": [{"name": "a", "command": "  "}]},
         "spec.health.checks[0].command: is empty; give the bash command that checks the node"),
        ({"checks": [{"name": "a", "command": "true", "intervalSeconds": 0}]},
         "spec.health.checks[0].intervalSeconds: Input should be greater than or equal to 1"),
        ({"checks": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]},
         "spec.health.checks: name a is used twice; name each check once"),
        ({"checks": [{"name": "A b", "command": "x"}]}, "spec.health.checks[0].name: "),
        ({"checks": []}, "spec.health.checks: "),
        ({"onFailure": "replace", "maxReplacements": 0, "checks": [{"name": "a", "command": "x"}]},
         "spec.health.maxReplacements: Input should be greater than or equal to 1"),
        ({"checks": [{"name": "a", "command": "x", "kind": "sometimes"}]},
         "spec.health.checks[0].kind: Input should be 'passive' or 'active'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_field(health, says):
    with pytest.raises(SpecError) as caught:
        MiniCluster.from_dict(doc(health))
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)


def test_flags_add_checks_and_time_those_without_an_interval():
    own = {"name": "own", "command": "true", "intervalSeconds": 7}
    placed = place(doc({"checks": [own]}), Placement(health_checks=("disk=fluxhop_disk_free /x 1",),
                                                    health_interval=5))  # fmt: skip
    assert placed["spec"]["health"]["checks"] == [
        own,
        {"name": "disk", "command": "fluxhop_disk_free /x 1", "intervalSeconds": 5},
    ]
    MiniCluster.from_dict(placed)  # and it is a valid spec


@pytest.mark.parametrize(
    ("placement", "says"),
    [
        (Placement(health_checks=("disk",)), "--health-check 'disk': write it as NAME=COMMAND"),
        (Placement(health_checks=("Disk=x",)), "--health-check 'Disk=x': "),
        (Placement(health_interval=5), "--health-interval: there is no health check to time"),
        (Placement(health_checks=("a=b",), health_interval=0), "--health-interval must be 1"),
    ],
)  # fmt: skip
def test_bad_flags_are_one_line_naming_the_flag(placement, says):
    container = {"image": "ubuntu:noble", "command": "true"}
    with pytest.raises(InputError) as caught:
        place(minicluster_doc("hc", size=2, containers=[container]), placement)
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)
