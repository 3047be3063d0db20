"""A MiniCluster from Flux-style flags."""

from __future__ import annotations

import pytest

from fluxhop.errors import SpecError
from fluxhop.spec.flags import minicluster_from_flags, parse_env


def test_flags_shape_the_spec():
    spec = minicluster_from_flags(
        ["sh", "-c", 'echo "a  b" && exit 3'],
        image="ubuntu:noble",
        nodes=4,
        tasks=8,
        cores_per_task=2,
        gpus_per_task=1,
        workdir="/work",
        env={"A": "1"},
        name="demo",
        namespace="team",
    )
    lead = spec.spec.flux_container
    assert (spec.name, spec.namespace, spec.spec.size, spec.spec.tasks) == ("demo", "team", 4, 8)
    assert lead.command == ["sh", "-c", 'echo "a  b" && exit 3']
    assert lead.resources.requests == {"cpu": "4"}  # 2 tasks per node x 2 cores
    assert lead.resources.limits == {"nvidia.com/gpu": "2"}
    assert spec.spec.flux.option_words() == ["-c", "2", "-g", "1"]
    assert lead.working_dir == "/work" and lead.environment == {"A": "1"}
    assert not spec.spec.interactive


def test_no_command_is_interactive_and_name_is_random():
    spec = minicluster_from_flags([], image="x", nodes=2)
    assert spec.spec.interactive and spec.spec.tasks == 2
    assert "-" in spec.name


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"nodes": 0}, "-N"),
        ({"nodes": 4, "tasks": 2}, "fewer tasks"),
        ({"tasks": 0}, "-n"),
        ({"cores_per_task": 0}, "-c"),
    ],
)
def test_bad_flags(kwargs, message):
    with pytest.raises(SpecError, match=message):
        minicluster_from_flags(["true"], image="x", **kwargs)


def test_parse_env():
    assert parse_env(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(SpecError, match="KEY=VALUE"):
        parse_env(["BAD"])
