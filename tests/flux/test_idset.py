"""RFC 22 idset codec against flux-core's test vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluxhop.errors import IdsetError
from fluxhop.flux import idset
from tests.conformance import by_op, load_vectors

VECTORS = by_op(load_vectors("idset/vectors.json"))

NOT_OFFERED = {
    "union": "set algebra is plain Python set operations on decode(...)",
    "difference": "set algebra is plain Python set operations on decode(...)",
    "intersect": "set algebra is plain Python set operations on decode(...)",
    "add": "fluxhop never mutates an idset in place",
    "subtract": "fluxhop never mutates an idset in place",
    "set_clear": "fluxhop never mutates an idset in place",
}
OFFERED = {
    "decode_encode",
    "invalid",
    "count",
    "expand",
    "construct",
    "decode_info",
    "iterate",
    "decode_empty",
    "universe_size",
}


def ids(vectors):
    return [v["id"] for v in vectors]


def test_every_vector_op_is_tested_or_excluded_with_a_reason():
    assert set(VECTORS) <= OFFERED | set(NOT_OFFERED)


def _flags(flags):
    if flags is None:  # Python str(): RANGE
        return {"ranges": True, "brackets": False}
    return {"ranges": "RANGE" in flags, "brackets": "BRACKETS" in flags}


@pytest.mark.parametrize("vector", VECTORS["decode_encode"], ids=ids(VECTORS["decode_encode"]))
def test_decode_encode(vector):
    decoded = idset.decode(vector["input"])
    assert idset.encode(decoded, **_flags(vector["flags"])) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=ids(VECTORS["invalid"]))
def test_invalid(vector):
    with pytest.raises(IdsetError):
        idset.decode(vector["input"])


@pytest.mark.parametrize("vector", VECTORS["count"], ids=ids(VECTORS["count"]))
def test_count(vector):
    assert idset.count(vector["input"]) == vector["expected"]
    assert len(idset.decode(vector["input"])) == vector["expected"]


@pytest.mark.parametrize(
    "vector",
    VECTORS["expand"] + VECTORS["iterate"],
    ids=ids(VECTORS["expand"] + VECTORS["iterate"]),
)
def test_expand_and_iterate(vector):
    decoded = idset.decode(vector["input"])
    expected = vector["expected"]
    if isinstance(expected, dict):
        assert decoded == expected["list"]
        assert (decoded[0], decoded[-1]) == (expected["first"], expected["last"])
    else:
        assert decoded == expected


@pytest.mark.parametrize("vector", VECTORS["construct"], ids=ids(VECTORS["construct"]))
def test_construct(vector):
    members = vector["input"]
    members = [members] if isinstance(members, int) else members
    assert idset.encode(members) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["decode_info"], ids=ids(VECTORS["decode_info"]))
def test_decode_info(vector):
    if vector.get("error"):
        with pytest.raises(IdsetError):
            idset.decode(vector["input"])
        return
    decoded = idset.decode(vector["input"])
    assert len(decoded) == vector["expected"]["count"]
    assert (decoded[-1] if decoded else None) == vector["expected"]["maxid"]


@pytest.mark.parametrize(
    "vector",
    VECTORS["decode_empty"] + VECTORS["universe_size"],
    ids=ids(VECTORS["decode_empty"] + VECTORS["universe_size"]),
)
def test_empty_and_universe(vector):
    decoded = idset.decode(vector["input"])
    if vector["op"] == "decode_empty":
        assert (decoded == []) is vector["expected"]
    else:
        assert decoded[-1] + 1 == vector["expected"]


@pytest.mark.parametrize("text", ["1-2x", "3,2", "[0", "[[0,2]", "0]2", "-5", "1,,2", ","])
def test_more_invalid(text):
    with pytest.raises(IdsetError):
        idset.decode(text)


@pytest.mark.parametrize("bad", [[-1], [2**32]])
def test_encode_rejects_non_ids(bad):
    with pytest.raises(IdsetError):
        idset.encode(bad)


@pytest.mark.parametrize("bad", [[True], ["3"]])
def test_encode_refuses_members_that_are_not_ints(bad):
    """A wrong type is the Python API's one-line TypeError naming the member."""
    with pytest.raises(TypeError, match=r"^idset.encode: ids\[0\] must be int, not (bool|str)$"):
        idset.encode(bad)


@given(st.sets(st.integers(0, 5000), max_size=200))
def test_roundtrip(members):
    for flags in ({}, {"ranges": False}, {"brackets": True}):
        assert idset.decode(idset.encode(members, **flags)) == sorted(members)
