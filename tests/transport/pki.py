"""A private certificate authority for the transport tests, made with ``cryptography``: EC P-256
keys, certificates valid for a day, servers named 127.0.0.1 and localhost."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


class Authority:
    """A CA in ``directory`` (``<name>-ca.pem``) that issues server and client certificates."""

    def __init__(self, directory: Path, name: str = "test") -> None:
        self.directory = directory
        self.name = name
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(f"{name} CA")
        self._subject = subject
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            _builder(subject, subject, self._key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.ca = directory / f"{name}-ca.pem"
        self.ca.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, file: str, common_name: str, *, server: bool, passphrase: str | None = None) -> Pair:
        """A certificate for ``common_name`` (a server's: for 127.0.0.1 and localhost too; "": a
        subject without a name, as etcd's gateway wants of clients when authentication is on)
        and its key (encrypted with ``passphrase`` when given), written 0600."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            _builder(_name(common_name), self._subject, key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        names: list[x509.GeneralName] = [x509.DNSName(file)]  # a client without a CommonName has this
        if server:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=not common_name)
        certificate = builder.sign(self._key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{file}.pem", self.directory / f"{file}.key"
        cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(passphrase.encode())
            if passphrase
            else serialization.NoEncryption()
        )
        key_path.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        )
        os.chmod(key_path, 0o600)
        return Pair(cert_path, key_path)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: datetime.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
