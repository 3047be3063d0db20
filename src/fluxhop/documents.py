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
  becomes its text, and ``!!binary``, ``!!set`` and the like are refused;
* an object's ``metadata.name`` and ``metadata.namespace``, written plain
  (unquoted), are read as Kubernetes' YAML reads them (go-yaml v2 under
  sigs.k8s.io/yaml, what kubectl and the API server use), not as PyYAML's YAML
  1.1 does: ``1e3``, ``08``, ``0o17`` are numbers there and ``y``, ``n``
  booleans, so such a name is refused here as ``kubectl apply`` would refuse
  it ("quote it"). Elsewhere plain scalars keep PyYAML's reading: PyYAML (and
  so ``fluxhop render``) writes those strings unquoted, and Flux reads jobspecs
  with PyYAML.

libyaml parses where PyYAML has it (it is fast on hostile text); every limit
but libyaml's own 1000-level nesting stop is checked on the composed nodes,
before a single value is built.
"""

from __future__ import annotations

import math
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from fluxhop.errors import FluxhopWarning, InputError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_TEXT",
    "MAX_VALUES",
    "go_reads_as_string",
    "load_all",
    "read_input",
]

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


_TAG = "tag:yaml.org,2002:"
_GO_VALUE = "tag:fluxhop,2026:go-plain"  # a plain scalar go-yaml reads as no string
_GO_READ = {("metadata", "name"), ("metadata", "namespace")}  # where (see the notes above)
_GO_MAP: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_LONGEST_NUMBER = 400  # characters of a plain scalar read the go-yaml way
# Go's strconv.ParseInt(s, 0, 64), go-yaml's yamlStyleFloat, and strconv.ParseFloat after a '.'
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")


def go_reads_as_string(text: str) -> bool:
    """Whether kubectl's YAML step (go-yaml v2) reads ``text``, written plain,
    as the string it is (``y``, ``1e3`` or ``0x1F`` it reads otherwise)."""
    return isinstance(_go_plain(text), str)


def _go_plain(text: str) -> Any:
    """A plain scalar as go-yaml v2's resolve() reads it into an interface{}
    (where a timestamp stays a string too)."""
    if text in _GO_MAP:
        return _GO_MAP[text]
    if len(text) > _LONGEST_NUMBER:
        return text  # no name is that long; left to the name's own check
    if text[:1] == ".":
        number = float(text) if _GO_DOT_FLOAT.fullmatch(text) else math.inf
        return number if math.isfinite(number) else text
    if text[:1] not in tuple("+-0123456789"):
        return text
    plain = text.replace("_", "")
    written = _GO_INT.fullmatch(plain)
    value, sign = None, ""
    if written:
        sign, digits = written.groups()
        base = 8 if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit() else 0
        value = int(sign + digits, base)
        if -(2**63) <= value < 2**63 or (not sign and value < 2**64):
            return value  # ParseInt, else ParseUint
    if _GO_FLOAT.fullmatch(plain) and math.isfinite(float(plain)):
        return float(plain)
    if value is not None and not sign:
        return value  # beyond uint64, unsigned: a big.Int
    return text


class _Resolver(yaml.resolver.Resolver):
    """PyYAML's resolver, but for a plain scalar at a path of _GO_READ that
    PyYAML reads as a string and go-yaml as something else."""

    def __init__(self) -> None:
        super().__init__()
        self._path: list[Any] = []

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        # a mapping's value comes with its key's node, a list's item with its index
        key = current_index.value if isinstance(current_index, ScalarNode) else current_index
        self._path.append(key)
        super().descend_resolver(current_node, current_index)

    def ascend_resolver(self) -> None:
        self._path.pop()
        super().ascend_resolver()

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        if (
            kind is ScalarNode
            and implicit[0]
            and tag == f"{_TAG}str"
            and tuple(self._path[1:]) in _GO_READ  # [0]: the document itself
            and not isinstance(_go_plain(value), str)
        ):
            return _GO_VALUE
        return tag


def _construct_go_plain(loader: Any, node: ScalarNode) -> Any:
    return _go_plain(node.value)


# types-PyYAML types add_constructor for loader classes, not constructor
# mixins like this one; the call is PyYAML's documented way all the same.
_Constructor.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:timestamp", _Constructor.construct_timestamp
)
for _tag in _REFUSED_TAGS:
    _Constructor.add_constructor(_tag, _Constructor.refuse)  # type: ignore[type-var]
_Constructor.add_constructor(_GO_VALUE, _construct_go_plain)

# libyaml's parser where PyYAML has it (its wheels do): fast on hostile text
# (PyYAML's own scanner is quadratic in flow nesting) and it stops nesting at
# 1000 levels itself; the rest of the limits are checked on the node graph.
try:
    from yaml._yaml import CParser as _Parser

    LIBYAML = True
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    LIBYAML = False


if LIBYAML:

    class _Loader(_Parser, _Constructor, _Resolver):
        def __init__(self, stream: str) -> None:
            _Parser.__init__(self, stream)
            _Constructor.__init__(self)
            _Resolver.__init__(self)

else:  # pragma: no cover - PyYAML without libyaml

    class _Loader(  # type: ignore[no-redef]  # the same name, without libyaml
        yaml.reader.Reader,
        yaml.scanner.Scanner,
        yaml.parser.Parser,
        yaml.composer.Composer,
        _Constructor,
        _Resolver,
    ):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _Constructor.__init__(self)
            _Resolver.__init__(self)


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
    except ValueError as err:  # an integer past Python's digit limit (4,300), and the like
        raise DocumentError(f"{what} holds a value fluxhop cannot read: {err}") from None
    finally:
        loader.dispose()
