"""RFC 29 hostlist codec against flux-core's own test vectors and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluxhop.errors import FluxhopError, HostlistError
from fluxhop.flux import hostlist
from tests.conformance import by_op, load_vectors

VECTORS = by_op(load_vectors("hostlist/vectors.json"))

# Operations of `flux hostlist` / libhostlist that fluxhop does not offer, and
# why their vectors are not run. Every op in the file must be here or tested.
NOT_OFFERED = {
    "append": "fluxhop builds lists from host names (encode), it never mutates one",
    "find": "rank lookup by name is not part of fluxhop's API",
    "index": "rank lookup by name is not part of fluxhop's API",
    "contains": "membership tests are plain `in decode(...)`",
    "delete": "fluxhop never edits hostlists in place",
    "uniq": "fluxhop never sorts or de-duplicates: broker rank order is the list order",
    "sort": "fluxhop never sorts: broker rank order is the list order",
    "union": "set algebra on hostlists is not part of fluxhop's API",
    "intersect": "set algebra on hostlists is not part of fluxhop's API",
    "xor": "set algebra on hostlists is not part of fluxhop's API",
    "minus": "set algebra on hostlists is not part of fluxhop's API",
    "exclude": "set algebra on hostlists is not part of fluxhop's API",
    "exclude_then_nth": "set algebra on hostlists is not part of fluxhop's API",
    "limit": "flux hostlist CLI output limiting is not part of fluxhop's API",
    "slice": "use Python slicing on decode(...)",
    "hostname_split": "internal to libhostlist; exercised through encode",
}
OFFERED = {"decode", "encode", "invalid", "count", "expand", "nth"}


def ids(vectors):
    return [v["id"] for v in vectors]


def test_every_vector_op_is_tested_or_excluded_with_a_reason():
    assert set(VECTORS) <= OFFERED | set(NOT_OFFERED)
    assert set(VECTORS) >= OFFERED


@pytest.mark.parametrize("vector", VECTORS["decode"], ids=ids(VECTORS["decode"]))
def test_decode_then_encode_gives_canonical_form(vector):
    hosts = hostlist.decode(vector["input"])
    assert hostlist.encode(hosts) == vector["expected"]
    if "count" in vector:
        assert len(hosts) == vector["count"]
        assert hostlist.count(vector["input"]) == vector["count"]


@pytest.mark.parametrize("vector", VECTORS["encode"], ids=ids(VECTORS["encode"]))
def test_encode(vector):
    given_input = vector["input"]
    if isinstance(given_input, dict):  # {"repeat": host, "times": n}
        hosts = [given_input["repeat"]] * given_input["times"]
    else:
        hosts = given_input
    encoded = hostlist.encode(hosts)
    if vector["expected"] is None:
        assert encoded
    else:
        assert encoded == vector["expected"]
    assert hostlist.decode(encoded) == hosts
    if "count" in vector:
        assert hostlist.count(encoded) == vector["count"]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=ids(VECTORS["invalid"]))
def test_invalid_input_is_one_line_error(vector):
    with pytest.raises(HostlistError) as info:
        hostlist.decode(vector["input"])
    assert "\n" not in str(info.value)
    assert isinstance(info.value, FluxhopError)


@pytest.mark.parametrize("vector", VECTORS["count"], ids=ids(VECTORS["count"]))
def test_count(vector):
    assert hostlist.count(vector["input"]) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["expand"], ids=ids(VECTORS["expand"]))
def test_expand(vector):
    assert hostlist.expand(vector["input"]) == vector["expected"]


@pytest.mark.parametrize("vector", VECTORS["nth"], ids=ids(VECTORS["nth"]))
def test_nth(vector):
    if vector.get("error"):
        with pytest.raises(HostlistError):
            hostlist.nth(vector["input"], vector["args"]["index"])
    else:
        assert hostlist.nth(vector["input"], vector["args"]["index"]) == vector["expected"]


@pytest.mark.parametrize(
    "text, hosts",
    [
        # rules from reference/flux-formats.md §3 and python-ecosystem.md §3.2
        ("foo1,foo1,foo1", ["foo1", "foo1", "foo1"]),
        ("foo[1,1,2,1]", ["foo1", "foo1", "foo2", "foo1"]),
        ("foo1 foo2\tfoo3", ["foo1", "foo2", "foo3"]),
        ("foo[005,4,11-13]", ["foo005", "foo4", "foo11", "foo12", "foo13"]),
        ("[00-2]", ["00", "01", "02"]),
        ("foo[0-02]", ["foo0", "foo1", "foo2"]),
        ("foo[1-3]-eth0", ["foo1-eth0", "foo2-eth0", "foo3-eth0"]),
        ("rack[1-2]node[1-4]", ["rack1node[1-4]", "rack2node[1-4]"]),
        ("test[1,128]", ["test1", "test128"]),
        (",1,2,", ["1", "2"]),
    ],
)
def test_decode_rules(text, hosts):
    assert hostlist.decode(text) == hosts


@pytest.mark.parametrize(
    "hosts, text",
    [
        (["host1", "host1", "host1"], "host[1,1,1]"),
        (["foo0", "bar1"], "foo0,bar1"),
        (["foo01", "foo1"], "foo[01,1]"),
        (["rack1node1", "rack1node2", "rack2node1", "rack2node2"], "rack1node[1-2],rack2node[1-2]"),
        (["foo1-bar", "foo3-bar"], "foo1-bar,foo3-bar"),
        (["foo9", "foo010"], "foo[9,010]"),
        (["foo09", "foo10"], "foo[09-10]"),
        (["foo9", "foo10"], "foo[9-10]"),
        (["1", "2", "3"], "[1-3]"),
        ([], ""),
    ],
)
def test_encode_rules(hosts, text):
    assert hostlist.encode(hosts) == text


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "foo[]",
        "foo[",
        "foo[1,3",
        "foo[[1,3]",
        "foo]",
        "foo[x-y]",
        "foo[0-1,2--5]",
        "foo[0-1048576]",
        "foo[p]",
        "foo[3-1]",
    ],
)
def test_decode_rejects(text):
    with pytest.raises(HostlistError):
        hostlist.decode(text)


def test_range_limit_is_inclusive_of_one_million():
    assert hostlist.count("foo[0-1048575]") == hostlist.MAX_RANGE


def test_too_many_ranges_in_a_bracket():
    text = "n[" + ",".join(str(i) for i in range(0, 2 * 10241, 2)) + "]"
    with pytest.raises(HostlistError, match="ranges"):
        hostlist.decode(text)


def test_encoding_of_a_huge_scattered_list_stays_decodable():
    hosts = [f"node{2 * i}" for i in range(hostlist.MAX_RANGES + 5)]
    text = hostlist.encode(hosts)
    assert text.count("node[") == 2  # split where flux's decoder would refuse
    assert hostlist.decode(text) == hosts


def test_errors_quote_huge_input_briefly():
    with pytest.raises(HostlistError) as info:
        hostlist.decode("x[" + "1," * 50_000 + "]")
    assert len(str(info.value)) < 200


@pytest.mark.parametrize("host", ["", "a,b", "a[1]", "a b", "a\tb"])
def test_encode_rejects_names_that_are_not_single_hosts(host):
    with pytest.raises(HostlistError):
        hostlist.encode(["ok1", host])


def test_encode_rejects_a_string():
    """A string is a wrong argument, not a bad hostlist: the Python API's
    one-line TypeError naming the parameter (fluxhop.arguments)."""
    with pytest.raises(TypeError, match=r"^hostlist.encode: hosts must be a list of str, not str$"):
        hostlist.encode("foo1,foo2")  # type: ignore[arg-type]


def test_nth_out_of_range_and_negative():
    assert hostlist.nth("foo[1-3],bar", -1) == "bar"
    with pytest.raises(HostlistError, match="out of range"):
        hostlist.nth("foo[1-3]", 3)
    with pytest.raises(HostlistError):
        hostlist.nth("", 0)


# Host names as they appear in MiniClusters: prefixes with digits and dashes,
# zero padding, repeats and arbitrary order.
_label = st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z]", fullmatch=True)
_number = st.integers(min_value=0, max_value=10**6)
_host = st.one_of(
    st.builds(lambda p, n, w: f"{p}{n:0{w}d}", _label, _number, st.integers(1, 8)),
    _label,
    st.builds(lambda p, n, s: f"{p}{n}{s}", _label, _number, _label),
)


@given(st.lists(_host, max_size=60))
def test_decode_inverts_encode(hosts):
    assert hostlist.decode(hostlist.encode(hosts)) == hosts


@given(st.lists(_host, max_size=60))
def test_encode_is_stable(hosts):
    text = hostlist.encode(hosts)
    assert hostlist.encode(hostlist.decode(text)) == text
    assert hostlist.count(text) == len(hosts)


@given(st.lists(st.integers(0, 300), max_size=80), st.integers(1, 4))
def test_numeric_runs_keep_order(numbers, width):
    hosts = [f"node{n:0{width}d}" for n in numbers]
    assert hostlist.decode(hostlist.encode(hosts)) == hosts
