"""ZeroMQ CURVE certificates in the exact layout ``flux keygen`` writes.

Every broker of a MiniCluster loads the same certificate: children pin the
parent's public key and the parent authorizes exactly that key (ZAP), so the
file must pass flux-core's reader (``src/common/libzmqutil/cert.c``):

* section headers ``metadata`` and ``curve`` start in column 0, entries are
  indented ``key = "value"`` lines, blank lines and ``#`` lines are skipped;
* key characters are alphanumerics, ``-`` and ``.``; value characters are
  alphanumerics, space, tab and ``.-:+=^!/*?&<>()[]{}@%$#`` — so no ``_``,
  ``,``, quotes, ``;``, ``|``, ``~``, backquote or backslash;
* every line fits flux's 256-byte ``fgets`` buffer;
* ``curve`` holds exactly ``public-key`` and ``secret-key``, 40 Z85
  characters each, and the public key is the X25519 image of the secret;
* ``metadata`` must carry ``name``: a broker with children hands it to ZAP and
  fails to boot without it.

Keys come from ``cryptography``'s X25519 generator, never from a public value
such as a Kubernetes object UID. Z85 (ZeroMQ RFC 32) is written by hand: it is
twenty lines, and pyzmq would pull in libzmq just for it (pyzmq stays a test
oracle for the real handshake).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from fluxhop.arguments import check_fields, checked
from fluxhop.errors import CurveCertError

__all__ = ["CurveCert", "z85_decode", "z85_encode"]

Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_INDEX = {char: value for value, char in enumerate(Z85_ALPHABET)}
_KEY_CHARS = re.compile(r"[A-Za-z0-9.\-]+")
_VALUE_CHARS = re.compile(r"[A-Za-z0-9 \t.\-:+=^!/*?&<>()\[\]{}@%$#]*")
_ENTRY_RE = re.compile(r"[ \t]+(?P<key>[^=]*?)[ \t]*=[ \t]*(?P<value>.*?)[ \t]*")
MAX_LINE_BYTES = 254  # a line plus its newline must fit flux's 255-char fgets read
HEADER = "#  ZeroMQ CURVE **Secret** Certificate\n#  DO NOT DISTRIBUTE\n\n"


@checked
def z85_encode(data: bytes) -> str:
    """ZeroMQ RFC 32 Z85; the input length must be a multiple of 4."""
    if len(data) % 4:
        raise CurveCertError(f"Z85 needs a multiple of 4 bytes, got {len(data)}")
    out: list[str] = []
    for offset in range(0, len(data), 4):
        value = int.from_bytes(data[offset : offset + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(Z85_ALPHABET[digit])
        out.extend(reversed(chunk))
    return "".join(out)


@checked
def z85_decode(text: str) -> bytes:
    """Inverse of :func:`z85_encode`."""
    if len(text) % 5:
        raise CurveCertError(f"Z85 text length must be a multiple of 5, got {len(text)}")
    out = bytearray()
    for offset in range(0, len(text), 5):
        value = 0
        for char in text[offset : offset + 5]:
            if char not in _Z85_INDEX:
                raise CurveCertError(f"{char!r} is not a Z85 character")
            value = value * 85 + _Z85_INDEX[char]
        if value > 0xFFFFFFFF:
            raise CurveCertError(f"Z85 group {text[offset : offset + 5]!r} overflows 32 bits")
        out += value.to_bytes(4, "big")
    return bytes(out)


def public_from_secret(secret_key: str) -> str:
    """Z85 public key of a Z85 X25519 secret key (``zmq_curve_public``)."""
    raw = z85_decode(secret_key)
    if len(raw) != 32:
        raise CurveCertError("a CURVE secret key is 32 bytes (40 Z85 characters)")
    public = X25519PrivateKey.from_private_bytes(raw).public_key().public_bytes_raw()
    return z85_encode(public)


def _check_key(which: str, value: str) -> None:
    if len(value) != 40 or any(char not in _Z85_INDEX for char in value):
        raise CurveCertError(f"curve {which} must be 40 Z85 characters")


def _check_metadata(key: str, value: str) -> None:
    if not _KEY_CHARS.fullmatch(key):
        raise CurveCertError(
            f"certificate metadata key {key!r} may only use letters, digits, '-' and '.'"
        )
    if not _VALUE_CHARS.fullmatch(value):
        bad = sorted({char for char in value if not _VALUE_CHARS.fullmatch(char)})
        raise CurveCertError(
            f"certificate metadata {key} = {value!r}: flux-core rejects the characters "
            f"{''.join(bad)!r}; use letters, digits, '-' or '.' instead"
        )


@dataclass(frozen=True)
class CurveCert:
    """A shared CURVE certificate. ``repr()`` never shows the secret key."""

    name: str | None
    public_key: str
    secret_key: str = field(repr=False)
    metadata: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)
        _check_key("public-key", self.public_key)
        _check_key("secret-key", self.secret_key)
        if public_from_secret(self.secret_key) != self.public_key:
            raise CurveCertError("curve public-key does not match the secret-key")
        if self.name is not None:
            _check_metadata("name", self.name)
        for key, value in self.metadata:
            if key == "name":
                raise CurveCertError("pass the certificate name as name=, not in metadata")
            _check_metadata(key, value)

    @classmethod
    @checked
    def generate(cls, name: str, metadata: dict[str, str] | None = None) -> CurveCert:
        """A fresh random X25519 key pair (``flux keygen --name=NAME``)."""
        if not name:
            raise CurveCertError("a certificate name is required (flux uses it for ZAP)")
        private = X25519PrivateKey.generate()
        return cls(
            name=name,
            public_key=z85_encode(private.public_key().public_bytes_raw()),
            secret_key=z85_encode(private.private_bytes_raw()),
            metadata=tuple((metadata or {}).items()),
        )

    def to_zpl(self) -> str:
        """The certificate file, byte-compatible with ``flux keygen``'s layout."""
        if not self.name:
            raise CurveCertError("a certificate without metadata name cannot boot a broker")
        lines = [HEADER, "metadata\n", f'    name = "{self.name}"\n']
        lines += [f'    {key} = "{value}"\n' for key, value in self.metadata]
        lines += [
            "curve\n",
            f'    public-key = "{self.public_key}"\n',
            f'    secret-key = "{self.secret_key}"\n',
        ]
        text = "".join(lines)
        _check_line_lengths(text)
        return text

    @classmethod
    @checked
    def from_zpl(cls, text: str, *, require_name: bool = True) -> CurveCert:
        """Read a certificate with flux-core's rules.

        ``require_name=False`` accepts what flux-core's parser accepts (a file
        with only a ``curve`` section); the default also demands the metadata
        ``name`` that a broker with children needs.
        """
        return _parse(text, require_name=require_name)


def _check_line_lengths(text: str) -> None:
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line.encode()) > MAX_LINE_BYTES:
            raise CurveCertError(
                f"certificate line {number} is longer than {MAX_LINE_BYTES} bytes; "
                "flux-core reads lines into a 256-byte buffer"
            )


def _parse(text: str, *, require_name: bool) -> CurveCert:
    if not isinstance(text, str):
        raise CurveCertError("a certificate must be text")
    _check_line_lengths(text)
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    current_name = ""
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[0] not in " \t":
            if stripped not in ("metadata", "curve") or stripped != line.rstrip():
                raise CurveCertError(
                    f"certificate line {number}: unknown section {stripped!r} "
                    "(only 'metadata' and 'curve' are allowed)"
                )
            if stripped in sections:
                raise CurveCertError(f"certificate line {number}: section {stripped} repeated")
            current_name = stripped
            current = sections[stripped] = {}
            continue
        if current is None:
            raise CurveCertError(f"certificate line {number}: entry outside a section")
        key, value = _parse_entry(line, number)
        if key in current:
            raise CurveCertError(f"certificate line {number}: {current_name} key {key} repeated")
        if current_name == "curve" and key not in ("public-key", "secret-key"):
            raise CurveCertError(f"certificate line {number}: unknown curve key {key!r}")
        current[key] = value
    curve = sections.get("curve")
    if not curve:
        raise CurveCertError("certificate has no curve section with keys")
    for which in ("public-key", "secret-key"):
        if which not in curve:
            raise CurveCertError(f"certificate curve section lacks {which}")
    metadata = dict(sections.get("metadata", {}))
    name = metadata.pop("name", None)
    if require_name and not name:
        raise CurveCertError(
            "certificate metadata has no name; a broker with children cannot "
            'authorize peers without it (add name = "...")'
        )
    return CurveCert(
        name=name,
        public_key=curve["public-key"],
        secret_key=curve["secret-key"],
        metadata=tuple(metadata.items()),
    )


def _parse_entry(line: str, number: int) -> tuple[str, str]:
    match = _ENTRY_RE.fullmatch(line)
    if not match:
        raise CurveCertError(f'certificate line {number}: expected key = "value"')
    key, value = match.group("key"), match.group("value")
    if len(value) < 2 or not value.startswith('"') or not value.endswith('"'):
        raise CurveCertError(f"certificate line {number}: value of {key} must be double-quoted")
    value = value[1:-1]
    if '"' in value:
        raise CurveCertError(f"certificate line {number}: stray quote in value of {key}")
    if not _KEY_CHARS.fullmatch(key):
        raise CurveCertError(f"certificate line {number}: bad key {key!r}")
    if not _VALUE_CHARS.fullmatch(value):
        raise CurveCertError(
            f"certificate line {number}: value of {key} has a character flux-core rejects"
        )
    return key, value
