"""Input documents at bounded cost, with Kubernetes' idea of values."""

from __future__ import annotations

import io
import tracemalloc

import pytest

from fluxhop.documents import MAX_BYTES, MAX_DEPTH, DocumentError, load_all, read_input
from fluxhop.errors import FluxhopWarning

LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


def refused(text: str) -> str:
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError) as info:
            load_all(text)
        assert tracemalloc.get_traced_memory()[1] < 32 << 20  # nothing was expanded
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "\n" not in message
    return message


def test_billion_laughs_is_refused_before_anything_is_built():
    assert len(LAUGHS) < 2048
    assert "expands to more than" in refused(LAUGHS)


def test_a_large_value_repeated_by_aliases_is_refused():
    text = "big: &b " + "x" * 500_000 + "\nmany: [" + ",".join(["*b"] * 2000) + "]\n"
    assert "MiB of text through YAML aliases" in refused(text)


def test_a_few_aliases_are_fine():
    docs = load_all("base: &b {cpu: 2}\nfirst: *b\nsecond: *b\n")
    assert docs == [{"base": {"cpu": 2}, "first": {"cpu": 2}, "second": {"cpu": 2}}]


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 300_000,
        "a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5),
        "a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 1400)),
    ],
    ids=["flow-unclosed", "flow-balanced", "block"],
)
def test_deep_nesting_is_refused(text):
    assert "nesting" in refused(text)


def test_an_alias_to_its_own_container_is_refused():
    assert "refers to the value that contains it" in refused("a: &a [1, *a]")


@pytest.mark.parametrize(
    "text, what",
    [
        ("image: !!binary aGVsbG8=", "!!binary"),
        ("s: !!set {a}", "!!set"),
        ("o: !!omap [a: 1]", "!!omap"),
    ],
)
def test_types_json_cannot_hold_are_refused(text, what):
    assert what in refused(text)


def test_python_tags_are_refused():
    assert "constructor" in refused("k: !!python/object/apply:os.system [id]")


def test_values_come_back_as_the_api_server_would_see_them():
    (doc,) = load_all("date: 2024-01-01\n1: one\ntrue: yes\nnull: ~\n2.5: x\n")
    assert doc == {"date": "2024-01-01", "1": "one", "true": True, "null": None, "2.5": "x"}


def test_a_key_set_twice_warns_and_the_last_wins():
    with pytest.warns(FluxhopWarning, match="'size' is set twice") as record:
        (doc,) = load_all("size: 1\nsize: 2\n")
    assert doc == {"size": 2} and len(record) == 1


def test_several_documents_and_empty_ones():
    assert load_all("a: 1\n---\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]


def test_invalid_yaml_is_one_line_with_the_line_number():
    message = refused("a: 1\n  b: 2\n")
    assert message.startswith("input is not valid YAML at line 2:")


def test_text_over_the_limit_is_refused():
    assert "larger than 1 MiB" in refused("x" * (MAX_BYTES + 1))


def test_read_input_stops_at_the_limit(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * (MAX_BYTES + 10))
    with pytest.raises(
        DocumentError, match=r"big.yaml is larger than 1 MiB, the most fluxhop reads"
    ):
        read_input(str(big))
    with pytest.raises(DocumentError, match="larger than 1 MiB"):
        read_input("/dev/zero")


def test_read_input_refuses_text_that_is_not_utf8(tmp_path):
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(DocumentError, match=r"is not UTF-8 text \(byte 9 is 0xe9\)"):
        read_input(str(latin))


def test_read_input_from_stdin(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("a: 1\n"))
    assert read_input("-") == "a: 1\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("a" * (MAX_BYTES + 1)))
    with pytest.raises(DocumentError, match="standard input is larger than 1 MiB"):
        read_input("-")


def test_a_missing_file_is_one_line():
    with pytest.raises(
        DocumentError, match=r"cannot read /no/such\.yaml: No such file or directory"
    ):
        read_input("/no/such.yaml")
