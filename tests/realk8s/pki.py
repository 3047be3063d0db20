"""The test cluster's certificates and keys, made fresh for each cluster.

One CA signs everything, as kubeadm's does: the API server's serving
certificate, the kubelets' serving certificates, and a client certificate
per identity (the user is the CN, the groups are the O's), which is how the
control plane components, the kubelets (``system:node:<name>`` in
``system:nodes``, so that the Node authorizer and NodeRestriction apply to
them) and the test's admin (``system:masters``) authenticate. The service
account tokens are signed with a separate key pair. EC P-256 keys: they are
made in microseconds, where RSA keys would take a good part of a second each.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "KeyPair"]

_VALID = datetime.timedelta(days=2)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, written as PEM files."""

    cert: Path
    key: Path


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


class CA:
    """A certificate authority whose files live in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fluxhop-test-cluster-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = _write(
            directory / "ca.crt", self._cert.public_bytes(serialization.Encoding.PEM), 0o644
        )

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        groups: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
    ) -> KeyPair:
        """A certificate for a client (no ``hosts``) or a server (its names and IPs)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
            + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        )
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(
            cert=_write(
                self.directory / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644
            ),
            key=_write(self.directory / f"{stem}.key", _pem_key(key), 0o600),
        )

    def signing_key(self, stem: str) -> KeyPair:
        """A bare key pair (``cert`` holds the public key), for service account tokens."""
        key = ec.generate_private_key(ec.SECP256R1())
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return KeyPair(
            cert=_write(self.directory / f"{stem}.pub", public, 0o644),
            key=_write(self.directory / f"{stem}.key", _pem_key(key), 0o600),
        )
