"""Which rabbits a MiniCluster lands on (reference §2.3 cases, made
deterministic and with an error instead of a size-0 MiniCluster)."""

from __future__ import annotations

import warnings

import pytest

from fluxhop.errors import FluxhopWarning
from fluxhop.rabbit.errors import RabbitError
from fluxhop.rabbit.placement import choose_rabbits, natural_key

RABBITS = ["rabbit-p10", "rabbit-p2", "rabbit-p1", "rabbit-p3"]


@pytest.mark.parametrize(
    ("wanted", "nodes", "expected"),
    [
        (None, None, ("rabbit-p1", "rabbit-p2", "rabbit-p3", "rabbit-p10")),
        (None, 2, ("rabbit-p1", "rabbit-p2")),
        (("rabbit-p3", "rabbit-p10"), None, ("rabbit-p3", "rabbit-p10")),
        (("rabbit-p10", "rabbit-p3"), 1, ("rabbit-p3",)),
        (("rabbit-p2", "elsewhere"), None, ("rabbit-p2",)),
    ],
)
def test_choice(wanted, nodes, expected):
    assert choose_rabbits(RABBITS, wanted, nodes) == expected


def test_more_nodes_than_rabbits_uses_all_and_says_so():
    with pytest.warns(FluxhopWarning, match=r"nodes=10 but only 4 rabbit"):
        assert len(choose_rabbits(RABBITS, None, 10)) == 4


def test_exactly_enough_rabbits_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(choose_rabbits(RABBITS, None, 4)) == 4


def test_same_input_same_choice_whatever_the_order():
    assert choose_rabbits(RABBITS, None, 3) == choose_rabbits(list(reversed(RABBITS)), None, 3)


def test_a_comma_string_of_available_rabbits_is_split():
    assert choose_rabbits("r2, r1,,r1", None, None) == ("r1", "r2")


def test_no_rabbits_available_says_why():
    with pytest.raises(RabbitError, match="no rabbits are available"):
        choose_rabbits([], None, None)


def test_a_filter_that_matches_nothing_lists_the_choices():
    with pytest.raises(RabbitError) as caught:
        choose_rabbits(RABBITS, ("r9",), None)
    assert "rabbit.mpi.rabbits=r9 names none of this job's rabbits" in str(caught.value)
    assert "rabbit-p1,rabbit-p2,rabbit-p3,rabbit-p10" in str(caught.value)


def test_natural_key_orders_numbers_by_value():
    names = ["n10", "n9", "m1", "n100", "n1a"]
    assert sorted(names, key=natural_key) == ["m1", "n1a", "n9", "n10", "n100"]
