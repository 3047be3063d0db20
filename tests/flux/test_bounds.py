"""Bounded cost: nothing is materialised in proportion to a count. Memory is
measured with tracemalloc (a number, not a wall-clock guess)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from fluxhop.errors import HostlistError, IdsetError
from fluxhop.flux import hostlist, idset
from fluxhop.flux.resources import ResourceSet

SMALL = 8 << 20  # bytes: far below what expanding any of these would take (gigabytes)


def peak(func: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = func()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_count_never_expands_a_suffixed_bracket():
    text = "x[" + ",".join(["0-1048575"] * hostlist.MAX_RANGES) + "]y"
    total, used = peak(lambda: hostlist.count(text))
    assert total == 1048576 * hostlist.MAX_RANGES
    assert used < SMALL


@pytest.mark.parametrize(
    "text", ["x[0-1048575],y[0-1048575]", "a[0-999999]b,c[0-999999]d", "h" + ",h" * 1048576]
)
def test_decode_refuses_more_than_its_limit_before_expanding(text):
    with pytest.raises(HostlistError, match="more than the 1048576 fluxhop expands") as info:
        peak(lambda: hostlist.decode(text))
    assert "\n" not in str(info.value)


def test_decode_within_the_limit_still_works():
    assert hostlist.decode("a[1-2]b,c") == ["a1b", "a2b", "c"]
    assert len(hostlist.decode("n[0-99999]")) == 100_000


def test_idset_decode_is_bounded_and_runs_and_count_never_expand():
    with pytest.raises(IdsetError, match="more than the 1048576 fluxhop expands"):
        idset.decode("0-4294967294")
    (runs, used) = peak(lambda: (idset.runs("0-4294967294"), idset.count("0-4294967294")))
    assert runs == ([(0, 4294967294)], 4294967295) and used < SMALL
    assert idset.decode("0-3", limit=4) == [0, 1, 2, 3]


def test_a_billion_cores_is_one_run_in_r():
    r, used = peak(
        lambda: ResourceSet.from_nodes("n-[0-99999]", cores=1_000_000_000, gpus=8).to_json()
    )
    assert '"core": "0-999999999", "gpu": "0-7"' in r and used < SMALL
    parsed, used = peak(lambda: ResourceSet.from_json(r))
    assert (parsed.nnodes, parsed.ncores) == (100_000, 100_000 * 1_000_000_000)
    assert used < SMALL


def test_r_with_four_billion_ranks_is_read_without_expanding_them():
    text = (
        '{"version": 1, "execution": {"R_lite": [{"rank": "0-4294967294", '
        '"children": {"core": "0-4294967294"}}]}}'
    )
    parsed, used = peak(lambda: ResourceSet.from_json(text))
    assert parsed.nnodes == 4294967295 and used < SMALL


def test_overlapping_ranks_are_still_found_without_expanding():
    text = (
        '{"version": 1, "execution": {"R_lite": ['
        '{"rank": "0-4000000000", "children": {"core": "0"}}, '
        '{"rank": "5,3999999999", "children": {"core": "0"}}]}}'
    )
    with pytest.raises(ValueError, match="rank 5 appears in more than one R_lite entry"):
        ResourceSet.from_json(text)
