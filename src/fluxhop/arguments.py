"""Arguments of the Python API, checked at the door.

A public function given a value of the wrong type fails where it is called,
with one line that names the function and the parameter::

    TypeError: jobspec.load: source must be str, bytes or a mapping, not int

and never with an ``AttributeError`` from deep inside. :func:`checked` makes
that true of a function from the annotations it already has (resolved with
:func:`typing.get_type_hints` on first call, so forward references work);
:func:`check_fields` does the same for a dataclass's fields. What is checked:
classes (``bool`` is not an ``int``; an ``int`` is a ``float``), ``None``,
unions, ``Literal``, callables, and the containers ``Mapping``/``dict`` (keys
and values), ``Sequence``/``list``/``tuple``/``Iterable``/``set`` (each
element, when the value is a collection rather than a one-shot iterator). A
``str`` or ``bytes`` is never taken for a sequence of words. Anything else
(``Any``, type variables, protocols, names only imported for type checking)
is left alone. No library fits: pydantic's ``validate_call`` coerces values
and reports in several lines, typeguard raises its own ``TypeCheckError``
(not a ``TypeError``) worded its own way; this is a few isinstance calls per
call, about a microsecond.
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import os
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, ParamSpec, TypeVar, overload

from fluxhop.nesting import short_repr, type_name

__all__ = ["check_fields", "checked", "rule_for"]

P = ParamSpec("P")
R = TypeVar("R")

# (where below the argument, what was expected, the value found) or None: fine
Problem = tuple[str, str, Any] | None


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


class Rule(ABC):
    """What one annotation accepts; :meth:`problem` says why a value is not it."""

    what = "anything"

    @abstractmethod
    def problem(self, value: Any) -> Problem: ...


class _Test(Rule):
    """A value passes ``test``: an instance check, a literal, callable()."""

    def __init__(self, test: Callable[[Any], bool], what: str) -> None:
        self.test, self.what = test, what

    def problem(self, value: Any) -> Problem:
        return None if self.test(value) else ("", self.what, value)


def _instance(cls: type, what: str | None = None) -> Rule:
    return _Test(lambda value: isinstance(value, cls), what or cls.__name__)


def _not_bool(kinds: tuple[type, ...], what: str) -> Rule:
    """int, or int and float: bool is an int to Python, never to an API."""
    return _Test(lambda value: isinstance(value, kinds) and not isinstance(value, bool), what)


def _literal(choices: tuple[Any, ...]) -> Rule:
    def test(value: Any) -> bool:
        return any(type(value) is type(choice) and value == choice for choice in choices)

    return _Test(test, "one of " + ", ".join(repr(choice) for choice in choices))


class _Union(Rule):
    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.what = _either([rule.what for rule in rules])

    def problem(self, value: Any) -> Problem:
        inner: Problem = None
        for rule in self.rules:
            found = rule.problem(value)
            if found is None:
                return None
            if found[0] and inner is None:  # right kind of container, a wrong element
                inner = found
        return inner or ("", self.what, value)


_WORDS = (str, bytes, bytearray)  # iterable, but never a list of words


class _Collection(Rule):
    def __init__(self, abstract: type, noun: str, item: Rule | None, index: bool) -> None:
        self.abstract, self.item, self.index = abstract, item, index
        self.what = f"{noun} of {item.what}" if item is not None else noun

    def problem(self, value: Any) -> Problem:
        if isinstance(value, _WORDS) or not isinstance(value, self.abstract):
            return ("", self.what, value)
        if self.item is None or isinstance(value, abc.Iterator):
            return None  # a one-shot iterator is not consumed here
        items = typing.cast(abc.Iterable[Any], value)
        for position, item in enumerate(items):
            found = self.item.problem(item)
            if found is not None:
                where = f"[{position}]" if self.index else " element"
                return (where + found[0], found[1], found[2])
        return None


class _Tuple(Rule):
    """``tuple[X, Y]``: a sequence of exactly those."""

    def __init__(self, items: list[Rule | None]) -> None:
        self.items = items
        self.what = f"a sequence of {len(items)}"

    def problem(self, value: Any) -> Problem:
        if isinstance(value, _WORDS) or not isinstance(value, abc.Sequence):
            return ("", self.what, value)
        if len(value) != len(self.items):
            return ("", self.what, value)
        for position, (rule, item) in enumerate(zip(self.items, value, strict=True)):
            found = rule.problem(item) if rule is not None else None
            if found is not None:
                return (f"[{position}]{found[0]}", found[1], found[2])
        return None


class _Mapping(Rule):
    def __init__(self, abstract: type, what: str, key: Rule | None, item: Rule | None) -> None:
        self.abstract, self.key, self.item = abstract, key, item
        self.what = what

    def problem(self, value: Any) -> Problem:
        if not isinstance(value, self.abstract):
            return ("", self.what, value)
        if self.key is None and self.item is None:
            return None
        mapping = typing.cast(abc.Mapping[Any, Any], value)
        for key, item in mapping.items():
            found = self.key.problem(key) if self.key is not None else None
            if found is not None:
                return (f" key {short_repr(key)}", found[1], found[2])
            found = self.item.problem(item) if self.item is not None else None
            if found is not None:
                return (f"[{short_repr(key)}]{found[0]}", found[1], found[2])
        return None


_SEQUENCES: dict[Any, tuple[type, str, bool]] = {
    list: (abc.Sequence, "a list", True),
    abc.Sequence: (abc.Sequence, "a list", True),
    abc.MutableSequence: (abc.MutableSequence, "a list", True),
    tuple: (abc.Sequence, "a list", True),
    abc.Iterable: (abc.Iterable, "a list", True),
    abc.Collection: (abc.Collection, "a list", True),
    set: (abc.Set, "a set", False),
    frozenset: (abc.Set, "a set", False),
    abc.Set: (abc.Set, "a set", False),
    abc.MutableSet: (abc.MutableSet, "a set", False),
}
_MAPPINGS: dict[Any, tuple[type, str]] = {
    dict: (dict, "a dict"),
    abc.Mapping: (abc.Mapping, "a mapping"),
    abc.MutableMapping: (abc.MutableMapping, "a mapping"),
}


def rule_for(annotation: Any) -> Rule | None:
    """The rule for an annotation; ``None`` when it accepts anything."""
    if annotation is Any or annotation is object or isinstance(annotation, TypeVar):
        return None
    if annotation is None or annotation is type(None):
        return _Test(lambda value: value is None, "None")
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return rule_for(args[0])
    if origin in (typing.Union, types.UnionType):
        rules = [rule_for(arg) for arg in args]
        if any(rule is None for rule in rules):
            return None
        return _Union([rule for rule in rules if rule is not None])
    if origin is typing.Literal:
        return _literal(args)
    if annotation is abc.Callable or origin is abc.Callable:
        return _Test(callable, "callable")
    if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
        return _Tuple([rule_for(arg) for arg in args])
    container = origin if origin is not None else annotation
    if container in _SEQUENCES:
        abstract, noun, index = _SEQUENCES[container]
        return _Collection(abstract, noun, rule_for(args[0]) if args else None, index)
    if container in _MAPPINGS:
        abstract, what = _MAPPINGS[container]
        key, item = (rule_for(args[0]), rule_for(args[1])) if len(args) == 2 else (None, None)
        return _Mapping(abstract, what, key, item)
    if origin is not None:  # another generic (os.PathLike[str], Iterator[int]): its class
        return rule_for(origin) if isinstance(origin, type) else None
    if not isinstance(annotation, type):
        return None
    if getattr(annotation, "_is_protocol", False) and not getattr(
        annotation, "_is_runtime_protocol", False
    ):
        return None
    if annotation is int:
        return _not_bool((int,), "int")
    if annotation is float:  # an int is a float (PEP 484's numeric tower)
        return _not_bool((int, float), "a number")
    return _instance(annotation, _NAMES.get(annotation))


_NAMES: dict[type, str] = {os.PathLike: "a path"}


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The annotations of ``func``, evaluated; a name that cannot be resolved at
    run time (imported only for type checking) leaves its parameter unchecked."""
    try:
        return typing.get_type_hints(func)
    except NameError:
        pass
    namespace = getattr(func, "__globals__", {})
    resolved: dict[str, Any] = {}
    for name, annotation in getattr(func, "__annotations__", {}).items():
        try:
            # what get_type_hints does, one annotation at a time: the function's
            # own annotation text, evaluated in its own module
            resolved[name] = (
                eval(annotation, namespace) if isinstance(annotation, str) else annotation
            )
        except NameError:
            continue
    return resolved


def _where(func: Callable[..., Any]) -> str:
    """``jobspec.load``, ``Client.get``, ``Client`` (for ``__init__``)."""
    qualname: str = func.__qualname__
    if qualname.endswith(".__init__"):
        return qualname.removesuffix(".__init__")
    if "." in qualname:
        return qualname
    return f"{func.__module__.rsplit('.', 1)[-1]}.{qualname}"


class _Plan:
    """Per parameter, the rule its values must follow."""

    def __init__(self, func: Callable[..., Any], where: str) -> None:
        hints = _hints(func)
        self.where = where
        self.positional: list[tuple[str, Rule | None]] = []
        self.named: dict[str, tuple[str, Rule | None]] = {}
        self.var_positional: tuple[str, Rule | None] | None = None
        self.var_keyword: tuple[str, Rule | None] | None = None
        kinds = inspect.Parameter
        for param in inspect.signature(func).parameters.values():
            entry = (param.name, rule_for(hints[param.name]) if param.name in hints else None)
            if param.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD):
                self.positional.append(entry)
            if param.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY):
                self.named[param.name] = entry
            elif param.kind is kinds.VAR_POSITIONAL:
                self.var_positional = entry
            elif param.kind is kinds.VAR_KEYWORD:
                self.var_keyword = entry

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for position, value in enumerate(args):
            if position < len(self.positional):
                name, rule = self.positional[position]
            elif self.var_positional is not None:
                name, rule = self.var_positional
            else:
                return  # too many arguments: Python's own TypeError says so
            if rule is not None:
                self._raise(name, rule.problem(value))
        for key, value in kwargs.items():
            name, rule = self.named.get(key) or self.var_keyword or (key, None)
            if rule is not None:
                self._raise(name, rule.problem(value))

    def _raise(self, name: str, problem: Problem) -> None:
        if problem is not None:
            below, what, value = problem
            raise TypeError(f"{self.where}: {name}{below} must be {what}, not {type_name(value)}")


@overload
def checked(func: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def checked(*, where: str) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def checked(
    func: Callable[P, R] | None = None, /, *, where: str | None = None
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Check the arguments of every call against ``func``'s annotations and raise
    ``TypeError("<where>: <param> must be <what>, not <type>")``, one line, on
    the first that does not fit. ``where`` names the function in the message
    (by default ``module.function`` or ``Class.method``)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        plan: list[_Plan] = []  # built on first call: forward references resolve by then

        @functools.wraps(function)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if not plan:
                plan.append(_Plan(function, where or _where(function)))
            plan[0].check(args, kwargs)
            return function(*args, **kwargs)

        return wrapper

    return decorate(func) if func is not None else decorate


_FIELD_RULES: dict[type, list[tuple[str, Rule]]] = {}


def check_fields(obj: Any) -> None:
    """Check a dataclass instance's fields against their annotations (call it
    first in ``__post_init__``); a ``TypeError`` names the class and field."""
    cls = type(obj)
    if cls not in _FIELD_RULES:
        assert is_dataclass(cls)
        hints = typing.get_type_hints(cls)
        rules = [(f.name, rule_for(hints[f.name])) for f in fields(cls) if f.name in hints]
        _FIELD_RULES[cls] = [(name, rule) for name, rule in rules if rule is not None]
    for name, rule in _FIELD_RULES[cls]:
        problem = rule.problem(getattr(obj, name))
        if problem is not None:
            below, what, value = problem
            raise TypeError(f"{cls.__name__}: {name}{below} must be {what}, not {type_name(value)}")
