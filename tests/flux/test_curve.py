"""CURVE certificates: flux-core's reader rules, its test vectors, and a real
ZeroMQ CURVE handshake with the keys we generate."""

from __future__ import annotations

import pytest
import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from fluxhop.errors import CurveCertError
from fluxhop.flux.curve import CurveCert, public_from_secret, z85_decode, z85_encode

# Test vectors from flux-core src/common/libzmqutil/test/cert.c
# (reference/flux-formats.md §2.5).
PAIR1 = ("FYFE.@650VuUqRGygAtG.RC$A<cid63q(WEnR+&y", "^Oto<5V$^d/V}kj6^Q[LRwdgAY5K3gE{gN2+1ox)")
PAIR2 = ("Viyg(M7U*Q6ZI=D6(q?]amgXrQ{[IQnEY{IF5*X)", "7F)3@>MGW.+)..qc)8R#lfL31*^QX<GXufgpVtbA")
CZMQ = ("8)TKx/<plQR>gO0.HCH/AsS3n[QeKMOy@}$)=GVu", "225YW{2q$:dqH]7cCbZW4a-}5Al/)0vkb>cE)o}Z")
OPERATOR = (".!?zfo10Ew)m=+J:j^zehs&{Ayy#BGSV0Eets5Ne", "vmk%8&dl7ICTfgx?*+0wgPb=@kFA>djvZU-Sl[T6")
MISMATCHED_PUBLIC = "YYFE.@650VuUqRGygAtG.RC$A<cid63q(WEnR+&y"

CZMQ_FILE = f"""#   ****  Generated on 2021-01-01 00:00:00 by CZMQ  ****
#   ZeroMQ CURVE **Secret** Certificate
#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

metadata
    name = "sample"
    keygen.czmq-version = "4.2.0"
    keygen.sodium-version = "1.0.18"
    keygen.flux-core-version = "0.30.0"
    keygen.hostname = "flux-sample-0"
    keygen.time = "2021-01-01T00:00:00"
    keygen.userid = "1000"
    keygen.zmq-version = "4.3.2"
curve
    public-key = "{CZMQ[0]}"
    secret-key = "{CZMQ[1]}"
"""

OPERATOR_FILE = f"""# **** Generated on 2023-04-26 22:54:42 by CZMQ ****
# ZeroMQ CURVE **Secret** Certificate
# DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.

metadata
    name = "flux-cert-generator"
    time = "2023-04-26T22:54:42"
    userid = "0"
    hostname = "flux-sample-0"
curve
    public-key = "{OPERATOR[0]}"
    secret-key = "{OPERATOR[1]}"
"""


def curve_only(public: str, secret: str) -> str:
    return f'curve\n    public-key = "{public}"\n\n    secret-key = "{secret}"\n'


@pytest.mark.parametrize(
    "pair", [PAIR1, PAIR2, CZMQ, OPERATOR], ids=["pair1", "pair2", "czmq", "operator"]
)
def test_vector_keypairs_agree_with_x25519(pair):
    assert public_from_secret(pair[1]) == pair[0]


def test_z85_rfc32_vector():
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld") == raw
    assert z85_encode(bytes(4)) == "00000"
    with pytest.raises(CurveCertError):
        z85_encode(b"\x01\x02\x03")


@pytest.mark.parametrize(
    "text, name, public",
    [
        (CZMQ_FILE, "sample", CZMQ[0]),
        (OPERATOR_FILE, "flux-cert-generator", OPERATOR[0]),
        (curve_only(*PAIR1), None, PAIR1[0]),
        (
            f'metadata\n    # only a comment\ncurve\n# column-0 comment\n    public-key = "{PAIR1[0]}"\n'
            f'    secret-key = "{PAIR1[1]}"\n',
            None,
            PAIR1[0],
        ),
        (curve_only(*PAIR2), None, PAIR2[0]),  # '#' inside the quotes is data
    ],
    ids=["czmq", "operator", "curve-only", "comments", "hash-in-key"],
)
def test_files_flux_core_parses(text, name, public):
    cert = CurveCert.from_zpl(text, require_name=False)
    assert cert.name == name
    assert cert.public_key == public


@pytest.mark.parametrize(
    "text",
    [
        "",
        'metadata\n    name = "x"\n',
        "curve\n",
        f"{curve_only(*PAIR1)}unknown\n",
        f' curve\n    public-key = "{PAIR1[0]}"\n    secret-key = "{PAIR1[1]}"\n',
        f'curve\npublic-key = "{PAIR1[0]}"\nsecret-key = "{PAIR1[1]}"\n',
        f'curve\n    secret-key = "{PAIR1[1]}"\n',
        f'curve\n    public-key = "{PAIR1[0]}"\n',
        curve_only("FYFE.@650 uUqRGygAtG.RC$A<cid63q(WEnR+&y", PAIR1[1]),
        f'curve\n    public-key = "{PAIR1[0]}\n    secret-key = "{PAIR1[1]}"\n',
        curve_only(PAIR1[0] * 2, PAIR1[1]),
        curve_only(MISMATCHED_PUBLIC, PAIR1[1]),
        f'metadata\n    name = "a_b"\n{curve_only(*PAIR1)}',
        f'metadata\n    name = "a,b"\n{curve_only(*PAIR1)}',
        f'metadata\n    na_me = "ab"\n{curve_only(*PAIR1)}',
        f'metadata\n    name = "a"\n    name = "b"\n{curve_only(*PAIR1)}',
        f'metadata\n    name = "{"x" * 300}"\n{curve_only(*PAIR1)}',
    ],
    ids=[
        "empty",
        "metadata-only",
        "empty-curve",
        "unknown-section",
        "indented-header",
        "unindented-keys",
        "no-public",
        "no-secret",
        "space-in-key",
        "missing-quote",
        "80-char-key",
        "mismatched",
        "underscore-value",
        "comma-value",
        "underscore-key",
        "duplicate-metadata",
        "long-line",
    ],
)
def test_files_flux_core_rejects(text):
    with pytest.raises(CurveCertError):
        CurveCert.from_zpl(text, require_name=False)


def test_name_is_required_by_default():
    with pytest.raises(CurveCertError, match="name"):
        CurveCert.from_zpl(curve_only(*PAIR1))


def test_generate_writes_flux_keygen_layout():
    cert = CurveCert.generate("flux-sample")
    text = cert.to_zpl()
    lines = text.splitlines()
    assert lines[:4] == [
        "#  ZeroMQ CURVE **Secret** Certificate",
        "#  DO NOT DISTRIBUTE",
        "",
        "metadata",
    ]
    assert lines[4] == '    name = "flux-sample"'
    assert lines[5:] == [
        "curve",
        f'    public-key = "{cert.public_key}"',
        f'    secret-key = "{cert.secret_key}"',
    ]
    assert text.endswith("\n")
    assert CurveCert.from_zpl(text) == cert
    assert len(cert.public_key) == len(cert.secret_key) == 40


def test_generate_is_random_and_never_shows_the_secret():
    first, second = CurveCert.generate("a"), CurveCert.generate("a")
    assert first.secret_key != second.secret_key
    assert first.secret_key not in repr(first)
    assert first.secret_key not in str(first)


@pytest.mark.parametrize("name", ["", "bad_name", "a,b", 'q"uote'])
def test_generate_rejects_names_flux_cannot_read(name):
    with pytest.raises(CurveCertError):
        CurveCert.generate(name).to_zpl()


def test_metadata_is_written_in_order():
    cert = CurveCert.generate("x", {"keygen.generator": "fluxhop", "keygen.hostname": "h-0"})
    text = cert.to_zpl()
    assert text.index("keygen.generator") < text.index("keygen.hostname")
    assert CurveCert.from_zpl(text).metadata == cert.metadata


class _OnlyKey:
    """ZAP policy of a Flux parent broker: authorize exactly the cert's key."""

    def __init__(self, public: str) -> None:
        self.public = public.encode()
        self.seen: list[bytes] = []

    def callback(self, domain: str, key: bytes) -> bool:  # key is Z85 text
        self.seen.append(key)
        return key == self.public


def _exchange(
    server_cert: CurveCert, client_public: str, client_secret: str, server_key: str
) -> tuple[bool, list[bytes]]:
    """Run a CURVE server with ``server_cert`` (ZAP pinned to its public key)
    and a client. Return whether a request/reply round trip succeeded and the
    client keys ZAP was asked about (empty when the handshake itself failed)."""
    assert zmq.has("curve")
    ctx = zmq.Context()
    auth = ThreadAuthenticator(ctx)
    auth.start()
    policy = _OnlyKey(server_cert.public_key)
    auth.configure_curve_callback(domain="*", credentials_provider=policy)
    server = ctx.socket(zmq.REP)
    client = ctx.socket(zmq.REQ)
    try:
        server.curve_server = True
        server.curve_secretkey = server_cert.secret_key.encode()
        server.curve_publickey = server_cert.public_key.encode()
        port = server.bind_to_random_port("tcp://127.0.0.1")
        client.curve_serverkey = server_key.encode()
        client.curve_publickey = client_public.encode()
        client.curve_secretkey = client_secret.encode()
        client.linger = 0
        client.connect(f"tcp://127.0.0.1:{port}")
        client.send(b"hello broker")
        if not server.poll(3000):
            return False, policy.seen
        assert server.recv() == b"hello broker"
        server.send(b"welcome")
        return bool(client.poll(3000)) and client.recv() == b"welcome", policy.seen
    finally:
        client.close(linger=0)
        server.close(linger=0)
        auth.stop()
        ctx.term()


def test_real_curve_handshake_with_generated_cert():
    cert = CurveCert.generate("flux-sample")
    # As in Flux: every rank uses the one shared cert as its own key pair and
    # pins the parent's (identical) public key.
    ok, seen = _exchange(cert, cert.public_key, cert.secret_key, cert.public_key)
    assert ok
    assert seen == [cert.public_key.encode()]


def test_real_curve_handshake_survives_the_file_round_trip():
    cert = CurveCert.from_zpl(CurveCert.generate("flux-sample").to_zpl())
    assert _exchange(cert, cert.public_key, cert.secret_key, cert.public_key)[0]


def test_client_with_a_different_cert_is_refused():
    cert = CurveCert.generate("flux-sample")
    other = CurveCert.generate("intruder")
    ok, seen = _exchange(cert, other.public_key, other.secret_key, cert.public_key)
    assert not ok
    assert seen == [other.public_key.encode()]  # refused by ZAP, as a Flux parent does


def test_client_pinning_the_wrong_server_key_gets_nothing():
    cert = CurveCert.generate("flux-sample")
    other = CurveCert.generate("intruder")
    ok, seen = _exchange(cert, cert.public_key, cert.secret_key, other.public_key)
    assert not ok
    assert seen == []  # the CURVE handshake itself fails before ZAP is asked


def test_pyzmq_agrees_on_public_key():
    cert = CurveCert.generate("x")
    assert zmq.curve_public(cert.secret_key.encode()).decode() == cert.public_key
