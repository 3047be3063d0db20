"""fluxhop.arguments: the Python API's argument checker and the nesting bound.

The checker must accept what the annotation says and refuse the rest in one
line naming the function and the parameter; each row below is one
(annotation, value) pair and whether it fits, so a wrong match fails here.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from fluxhop.arguments import check_fields, checked, rule_for
from fluxhop.documents import MAX_DEPTH, load_all
from fluxhop.errors import InputError
from fluxhop.nesting import check_data, check_json_text

if TYPE_CHECKING:
    from fluxhop.client import Client  # a name only type checkers see


def accepts(annotation: Any, value: Any) -> bool:
    rule = rule_for(annotation)
    return rule is None or rule.problem(value) is None


class Base:
    pass


class Derived(Base):
    pass


# (annotation, value, fits)
ROWS: list[tuple[Any, Any, bool]] = [
    (int, 3, True),
    (int, True, False),  # bool is not an int where an int is asked
    (int, 3.0, False),
    (int, "3", False),
    (float, 3, True),  # an int is a number
    (float, 2.5, True),
    (float, False, False),
    (bool, True, True),
    (bool, 1, False),
    (str, "", True),
    (str, b"x", False),
    (bytes, b"x", True),
    (bytes, "x", False),
    (None, None, True),
    (None, 0, False),
    (int | None, None, True),
    (int | None, 0, True),
    (int | None, "0", False),
    (str | bytes | Mapping[str, Any], {"a": 1}, True),
    (str | bytes | Mapping[str, Any], ["a"], False),
    (Base, Derived(), True),
    (Derived, Base(), False),
    (Sequence[str], ["a", "b"], True),
    (Sequence[str], ("a",), True),
    (Sequence[str], "ab", False),  # a string is not a list of words
    (Sequence[str], b"ab", False),
    (Sequence[str], ["a", 1], False),
    (Sequence[str], {"a"}, False),  # a set has no order
    (list[int], [1, 2], True),
    (list[int], [1, True], False),
    (tuple[str, ...], ["a"], True),
    (tuple[str, int], ("a", 1), True),
    (tuple[str, int], ("a", "b"), False),
    (tuple[str, int], ("a",), False),
    (Iterable[str], {"a", "b"}, True),
    (Iterable[str], {1}, False),
    (Iterable[str], "ab", False),
    (Iterable[str], iter([1]), True),  # a one-shot iterator is not consumed to look
    (Iterable[str] | str, "a,b", True),
    (Mapping[str, str], {"a": "b"}, True),
    (Mapping[str, str], types.MappingProxyType({"a": "b"}), True),
    (Mapping[str, str], {"a": 1}, False),
    (Mapping[str, str], {1: "a"}, False),
    (Mapping[str, str], [("a", "b")], False),
    (dict[str, Any], {"a": object()}, True),
    (dict[str, Any], types.MappingProxyType({}), False),  # a dict is asked: it is mutated
    (Literal["a", "b"], "a", True),
    (Literal["a", "b"], "c", False),
    (Literal[1], True, False),
    (Callable[[int], int], len, True),
    (Callable[[int], int], 3, False),
    (os.PathLike[str], Path("x"), True),
    (os.PathLike[str], "x", False),
    (Iterator[int], iter([]), True),
    (Iterator[int], [], False),
    (Any, object(), True),
    (object, None, True),
]


@pytest.mark.parametrize(("annotation", "value", "fits"), ROWS, ids=repr)
def test_rule_matches_the_annotation(annotation, value, fits):
    assert accepts(annotation, value) is fits


def test_a_one_shot_iterator_is_left_unconsumed():
    items = iter(["a", "b"])
    assert accepts(Iterable[str], items)
    assert list(items) == ["a", "b"]


@checked
def load(source: str | bytes | Mapping[str, Any], *, v1: bool = True) -> str:
    return "loaded"


@checked(where="words.split")
def split(command: Sequence[str], env: Mapping[str, str] | None = None, *rest: int) -> int:
    return len(command)


class Thing:
    @checked
    def __init__(self, name: str) -> None:
        self.name = name

    @checked
    def rename(self, name: str, owner: Client | None = None) -> str:
        return name

    @classmethod
    @checked
    def make(cls, size: int) -> Thing:
        return cls(str(size))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: load(7), "test_arguments.load: source must be str, bytes or a mapping, not int"),
        (
            lambda: load(None),
            "test_arguments.load: source must be str, bytes or a mapping, not None",
        ),
        (lambda: load("x", v1="yes"), "test_arguments.load: v1 must be bool, not str"),
        (lambda: split("zz"), "words.split: command must be a list of str, not str"),
        (lambda: split(["a", 2]), "words.split: command[1] must be str, not int"),
        (lambda: split(["a"], {"A": 1}), "words.split: env['A'] must be str, not int"),
        (lambda: split(["a"], None, 1, "2"), "words.split: rest must be int, not str"),
        (lambda: Thing(b"x"), "Thing: name must be str, not bytes"),
        (lambda: Thing("a").rename(1), "Thing.rename: name must be str, not int"),
        (lambda: Thing.make(size="4"), "Thing.make: size must be int, not str"),
    ],
)
def test_checked_refuses_in_one_line_naming_function_and_parameter(call, message):
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == message


def test_checked_passes_what_fits_and_keeps_the_function_s_face():
    assert load({"a": 1}) == "loaded" and load(b"x", v1=False) == "loaded"
    assert split(("a", "b"), None, 1, 2) == 2
    assert Thing.make(3).name == "3"
    # a name only a type checker sees leaves that parameter alone, not the others
    assert Thing("a").rename("b", owner=object()) == "b"  # type: ignore[arg-type]
    assert load.__name__ == "load" and load.__wrapped__  # type: ignore[attr-defined]
    assert Thing.rename.__doc__ is None and split.__qualname__ == "split"
    with pytest.raises(TypeError, match="takes"):  # too many arguments: Python's own error
        load("a", "b")  # type: ignore[misc]


@dataclass(frozen=True)
class Options:
    words: tuple[str, ...] = ()
    limit: int | None = None

    def __post_init__(self) -> None:
        check_fields(self)


def test_check_fields():
    assert Options(["a"], 3).limit == 3  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Options: words\[0\] must be str, not int$"):
        Options((1,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Options: limit must be int or None, not bool$"):
        Options(limit=True)


def nested(depth: int, leaf: Any = "x") -> Any:
    """``depth`` levels as the document reader counts them (the leaf is one)."""
    value = leaf
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_the_bound_is_the_document_reader_s():
    """Whatever a file may hold passes check_data, and one level more does not."""

    def text(depth: int) -> str:
        return '{"a": ' * (depth - 1) + '"x"' + "}" * (depth - 1)

    (doc,) = load_all(text(MAX_DEPTH))
    assert doc == nested(MAX_DEPTH)
    check_data(doc, "doc")
    with pytest.raises(InputError, match="deeper than 100"):
        load_all(text(MAX_DEPTH + 1))
    with pytest.raises(InputError, match=r"^doc is nested deeper than 100 levels$"):
        check_data(nested(MAX_DEPTH + 1), "doc")


def test_check_data_is_iterative_bounded_and_cheap():
    class Refused(ValueError):
        pass

    with pytest.raises(Refused, match=r"^R is nested deeper than 100 levels$"):
        check_data(nested(100_000), "R", error=Refused)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(Refused, match="deeper"):
        check_data(loop, "R", error=Refused)
    shared: Any = "x"
    for _ in range(90):  # 2**90 paths, 90 distinct lists: walked once per depth
        shared = [shared, shared]
    check_data(shared, "R")
    check_data([nested(50)] * 1000, "R")


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"attributes": {"user": {"x": b"\0"}}}, "jobspec attributes.user.x: bytes is not a JSON"),
        ({"tasks": [{"command": ["a", {1, 2}]}]}, "jobspec tasks[0].command[1]: set is not a JSON"),
        ({"a": {1: "x"}}, "jobspec a: key 1 is int; JSON keys are strings"),
        ({2: "x"}, "jobspec top level: key 2 is int"),
        (Path("x"), "jobspec is PosixPath, which is not a JSON value"),
    ],
)
def test_check_data_json_names_the_path(value, words):
    with pytest.raises(InputError) as info:
        check_data(value, "jobspec", json=True)
    assert str(info.value).startswith(words)
    check_data(value, "jobspec")  # without json=True only the depth counts


def test_json_data_passes():
    check_data({"a": [1, 2.5, True, None, "s", (1, 2)], "b": {}}, "R", json=True)


def test_check_json_text():
    check_json_text('{"a": "' + "[" * 5000 + '"}', "R")  # brackets in strings do not count
    check_json_text("[" * 100 + "]" * 100, "R")
    with pytest.raises(InputError, match=r"^R is nested deeper than 100 levels$"):
        check_json_text("[" * 101 + "]" * 101, "R")
    with pytest.raises(InputError, match="deeper"):
        check_json_text('{"a": ' * 5000, "R")  # unbalanced: refused before json.loads
