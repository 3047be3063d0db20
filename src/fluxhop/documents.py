"""Input documents (YAML or JSON) read as Kubernetes reads them, at bounded cost.

Every file fluxhop reads - MiniCluster and TrainJob manifests, Flux jobspecs,
kubeconfigs - comes through here, so that hostile input costs little:

* at most :data:`MAX_BYTES` (1 MiB) are read (``/dev/zero`` included) and the text must
  be UTF-8;
* nesting deeper than :data:`MAX_DEPTH` is refused while it is parsed;
* aliases are allowed, but a document that would expand to more than
  :data:`MAX_VALUES` values or :data:`MAX_TEXT` characters is refused before
  anything is built from it ("billion laughs" is a few KB of aliases), and so
  is an alias to itself;
* only what JSON can hold comes back - strings, numbers, booleans, null,
  lists and string-keyed mappings - as the API server's YAML-to-JSON step
  gives (a key set twice warns, the last value wins, as there): a timestamp stays the string it was written as, a non-string key
  becomes its text, and ``!!binary``, ``!!set`` and the like are refused.

libyaml parses where PyYAML has it (it is fast on hostile text); every limit
but libyaml's own 1000-level nesting stop is checked on the composed nodes,
before a single value is built.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from fluxhop.errors import FluxhopWarning, InputError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_TEXT", "MAX_VALUES", "load_all", "read_input"]

MAX_BYTES = 1024 * 1024  # the API server refuses objects over 1.5 MiB anyway
MAX_DEPTH = 100
MAX_VALUES = 1_000_000
MAX_TEXT = 16 * 1024 * 1024  # characters of all scalars, aliases expanded


class DocumentError(InputError):
    """A file or document that cannot be read, or would cost too much to."""


def _kib(size: int) -> str:
    return f"{size // (1024 * 1024)} MiB" if size >= 1024 * 1024 else f"{size // 1024} KiB"


def read_input(path: str, what: str = "file") -> str:
    """The text of ``path`` (``-`` for stdin), at most :data:`MAX_BYTES`, UTF-8."""
    try:
        if path == "-":
            path = "standard input"
            binary = getattr(sys.stdin, "buffer", None)
            if binary is None:  # a text stream put in its place (tests, embedding)
                text = sys.stdin.read(MAX_BYTES + 1)
                data = text.encode("utf-8", "surrogateescape")
            else:
                data = binary.read(MAX_BYTES + 1)
        else:
            with Path(path).open("rb") as stream:
                data = stream.read(MAX_BYTES + 1)
    except OSError as err:
        raise DocumentError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > MAX_BYTES:
        raise DocumentError(
            f"{what} {path} is larger than {_kib(MAX_BYTES)}, the most fluxhop reads "
            "(a MiniCluster or TrainJob manifest is a few KiB)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DocumentError(
            f"{what} {path} is not UTF-8 text (byte {err.start} is {data[err.start]:#04x}); "
            "save it as UTF-8"
        ) from None


_REFUSED_TAGS = {
    "tag:yaml.org,2002:binary": "binary data",
    "tag:yaml.org,2002:set": "a set",
    "tag:yaml.org,2002:omap": "an ordered map",
    "tag:yaml.org,2002:pairs": "a list of pairs",
}


class _Constructor(yaml.constructor.SafeConstructor):
    """Kubernetes' idea of values: JSON's types, timestamps kept as text."""

    def construct_timestamp(self, node: ScalarNode) -> str:
        return str(node.value)  # the API server keeps 2024-01-01 a string

    def refuse(self, node: Node) -> Any:
        raise DocumentError(
            f"line {node.start_mark.line + 1}: !!{node.tag.rsplit(':', 1)[-1]} "
            f"({_REFUSED_TAGS[node.tag]}) is not allowed: Kubernetes documents hold only "
            "strings, numbers, booleans, lists and mappings"
        )

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[str, Any]:  # type: ignore[override]
        # Keys become text before they meet in a dict (1 and true would collide).
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _key_text(self.construct_object(key_node, deep=deep), key_node)
            if key in mapping:
                warnings.warn(
                    f"line {key_node.start_mark.line + 1}: {key!r} is set twice in one mapping; "
                    "the last value is used (the API server warns of it too)",
                    FluxhopWarning,
                    stacklevel=2,
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _key_text(key: Any, node: Node) -> str:
    """A mapping key as the YAML-to-JSON step writes it."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, (int, float)):
        return str(key)
    raise DocumentError(
        f"line {node.start_mark.line + 1}: a mapping key must be a string, not {type(key).__name__}"
    )


# types-PyYAML types add_constructor for loader classes, not constructor
# mixins like this one; the call is PyYAML's documented way all the same.
_Constructor.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:timestamp", _Constructor.construct_timestamp
)
for _tag in _REFUSED_TAGS:
    _Constructor.add_constructor(_tag, _Constructor.refuse)  # type: ignore[type-var]

# libyaml's parser where PyYAML has it (its wheels do): fast on hostile text
# (PyYAML's own scanner is quadratic in flow nesting) and it stops nesting at
# 1000 levels itself; the rest of the limits are checked on the node graph.
try:
    from yaml._yaml import CParser as _Parser

    LIBYAML = True
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    LIBYAML = False


if LIBYAML:

    class _Loader(_Parser, _Constructor, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            _Parser.__init__(self, stream)
            _Constructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

else:  # pragma: no cover - PyYAML without libyaml

    class _Loader(  # type: ignore[no-redef]  # the same name, without libyaml
        yaml.reader.Reader,
        yaml.scanner.Scanner,
        yaml.parser.Parser,
        yaml.composer.Composer,
        _Constructor,
        yaml.resolver.Resolver,
    ):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _Constructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _too_big(node: Node) -> DocumentError:
    return DocumentError(
        f"the document expands to more than {MAX_VALUES} values or "
        f"{MAX_TEXT // (1024 * 1024)} MiB of text through YAML aliases "
        f"(line {node.start_mark.line + 1}); write the values out instead"
    )


def _measure(root: Node) -> None:
    """Refuse a document that nests deeper than MAX_DEPTH, refers to itself, or
    whose aliases expand past the limits. Shared nodes count once per use;
    each distinct node is visited once (no recursion, no expansion)."""
    done: dict[int, tuple[int, int]] = {}
    active: set[int] = set()

    def enter(node: Node, depth: int) -> list[Any]:
        if depth > MAX_DEPTH:
            raise DocumentError(
                f"nesting deeper than {MAX_DEPTH} levels at line {node.start_mark.line + 1}; "
                "no Kubernetes object is that deep"
            )
        active.add(id(node))
        text = len(node.value) if isinstance(node, ScalarNode) else 0
        return [node, iter(_children(node)), 1, text]

    def add(frame: list[Any], values: int, text: int) -> None:
        frame[2] += values
        frame[3] += text
        if frame[2] > MAX_VALUES or frame[3] > MAX_TEXT:
            raise _too_big(frame[0])

    stack = [enter(root, 1)]
    while stack:
        frame = stack[-1]
        child = next(frame[1], None)
        if child is None:
            stack.pop()
            active.discard(id(frame[0]))
            done[id(frame[0])] = (frame[2], frame[3])
            if stack:
                add(stack[-1], frame[2], frame[3])
        elif id(child) in done:
            add(frame, *done[id(child)])
        elif id(child) in active:
            raise DocumentError(
                f"line {child.start_mark.line + 1}: an alias refers to the value that contains it"
            )
        else:
            stack.append(enter(child, len(stack) + 1))


def load_all(text: str, what: str = "input") -> list[Any]:
    """Every non-empty document in ``text`` (YAML, so JSON too)."""
    if len(text) > MAX_BYTES:
        raise DocumentError(f"{what} is larger than {_kib(MAX_BYTES)}, the most fluxhop reads")
    loader = _Loader(text)
    try:
        nodes = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                _measure(node)
                nodes.append(node)
        return [doc for doc in map(loader.construct_document, nodes) if doc is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise DocumentError(f"{what} is not valid YAML{where}: {problem}") from None
    finally:
        loader.dispose()
