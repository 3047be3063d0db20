"""The one-line form of spec errors (spec/screen.py), errors in the words the
user typed (in_terms), and values quoted short (fluxhop.errors.shown, clipped)."""

from __future__ import annotations

import pytest

from fluxhop.errors import clipped, shown
from fluxhop.spec.minicluster import MiniCluster
from fluxhop.spec.screen import format_path, in_terms

NAMES = (
    ("spec.containers[0].image", "--image"),
    ("rabbit.mpi.env", "-e/--env"),
    ("rabbit.mpi.tasks", "--tasks"),
    ("metadata.name", "--name"),
)


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ("spec.containers[0].image: 'X' is bad", "--image: 'X' is bad"),
        ("rabbit.mpi.tasks=0: must be 1 or more", "--tasks 0: must be 1 or more"),
        ("rabbit.mpi.env.é: must be a name", "-e/--env é: must be a name"),
        ("metadata.name 'x' is too long", "--name 'x' is too long"),
        ("metadata.name", "--name"),
        # a longer field that only starts alike is not renamed
        ("rabbit.mpi.environment: x", "rabbit.mpi.environment: x"),
        ("metadata.namespace: x", "metadata.namespace: x"),
        ("spec.size: 0", "spec.size: 0"),
    ],
)
def test_in_terms(message, named):
    assert in_terms(message, NAMES) == named


def test_shown_quotes_short_values_whole_and_cuts_long_ones():
    assert shown("abc") == "'abc'"
    assert shown("a" * 60) == repr("a" * 60)
    assert shown("a" * 100_000) == repr("a" * 60) + "... (100000 characters)"
    assert shown(5) == "5"
    assert shown(["x" * 100]).endswith("... (104 characters)")  # its repr, cut


def test_clipped_keeps_head_and_tail():
    assert clipped("short") == "short"
    line = clipped("head " + "x" * 100_000 + " tail")
    assert len(line) < 500 and line.startswith("head x") and line.endswith("x tail")
    assert "characters cut" in line


def test_a_huge_key_is_cut_in_a_path():
    assert format_path(("spec", "k" * 1000, 0)) == "spec." + "k" * 60 + "...[0]"


def test_a_huge_unknown_key_is_one_short_line():
    doc = {"spec": {"containers": [{"image": "ubuntu", "k" * 100_000: 1}]}}
    with pytest.raises(ValueError) as info:
        MiniCluster.from_dict(doc)
    assert len(str(info.value)) < 500


@pytest.mark.parametrize(
    ("name", "words"),
    [(123, "must be a string, not the number 123; quote it in the YAML"),
     (True, "must be a string, not true; quote it in the YAML"),
     (1000.0, "must be a string, not the number 1000.0")],
)  # fmt: skip
def test_a_name_that_is_no_string_says_quote_it(name, words):
    doc = {"metadata": {"name": name}, "spec": {"containers": [{"image": "ubuntu"}]}}
    with pytest.raises(ValueError, match="^metadata.name: " + words.replace(".", r"\.")):
        MiniCluster.from_dict(doc)
