"""TLS contexts: the API's (server side) and the backends' (client side), built in one place.

Every file is read when the context is built, at start-up, before any backend is touched: a
certificate or key that is missing, unreadable, not PEM, encrypted with another passphrase, or a
key that does not match its certificate stops the process at once with a :class:`TlsConfigError`
(a :class:`~cronwheel.errors.PermanentError`: the CLI prints it and exits 2) that names the
file and the option it came from. Nothing is retried: a certificate does not get better by
waiting.

Both sides speak TLS 1.2 or newer with OpenSSL's default ciphers. Certificates are read once:
a renewed certificate takes a restart (there is no reload on SIGHUP).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from cronwheel.errors import PermanentError, causes

Verify = Literal["none", "ca", "full"]  # nothing; the chain only; the chain and the host name


class TlsConfigError(PermanentError):
    """A certificate, key or CA file that cannot be used (see the module docstring)."""


# TLS failures that waiting does not cure: the server's certificate does not verify, the server
# refused the client's (none, or not of its CA), or one side speaks TLS and the other does not
_REFUSALS = ("CERTIFICATE", "UNKNOWN_CA", "WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG")


def tls_refused(error: BaseException | None) -> bool:
    """Whether a TLS failure that waiting does not cure lies under ``error`` (drivers raise their
    own errors from, or inside the ``except`` of, the :class:`ssl.SSLError`): a backend client
    turns it into a permanent refusal instead of waiting for the backend as if it were down."""
    return any(
        isinstance(cause, ssl.SSLCertVerificationError)
        or (isinstance(cause, ssl.SSLError) and any(word in str(cause).upper() for word in _REFUSALS))
        for cause in causes(error)
    )


@dataclass(frozen=True, slots=True)
class ServerTls:
    """What an HTTPS endpoint serves with: its certificate chain and key (PEM), and, for mutual
    TLS, the CA whose certificates clients must present."""

    cert: str
    key: str
    client_ca: str | None = None
    options: tuple[str, str, str] = ("--tls-cert", "--tls-key", "--tls-client-ca")  # for messages

    def context(self) -> ssl.SSLContext:
        cert_option, key_option, ca_option = self.options
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        _load_chain(context, _Pem(self.cert, cert_option), _Pem(self.key, key_option), None)
        if self.client_ca is not None:
            _load_ca(context, _Pem(self.client_ca, ca_option))
            context.verify_mode = ssl.CERT_REQUIRED
        return context


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How a client checks a server and proves who it is: the CA file to verify the server with
    (None: the system's trust store), how much to verify, and an optional client certificate and
    key (with the key's passphrase). ``names`` say which URL parameter set each file, for
    messages: (CA, certificate, key)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    key_password: str | None = field(default=None, repr=False)
    verify: Verify = "full"
    names: tuple[str, str, str] = ("CA", "client certificate", "client key")

    def context(self) -> ssl.SSLContext:
        ca_name, cert_name, key_name = self.names
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.verify == "full"
        context.verify_mode = ssl.CERT_NONE if self.verify == "none" else ssl.CERT_REQUIRED
        if self.ca is not None:
            _load_ca(context, _Pem(self.ca, ca_name))
        elif self.verify != "none":
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.key is not None and self.cert is None:
            raise TlsConfigError(f"{key_name} {self.key} needs a {cert_name} beside it")
        if self.cert is not None:
            key = _Pem(self.key or self.cert, key_name if self.key else cert_name)
            _load_chain(context, _Pem(self.cert, cert_name), key, self.key_password)
        return context


@dataclass(frozen=True, slots=True)
class _Pem:
    path: str
    option: str

    def read(self, what: str) -> bytes:
        try:
            data = Path(self.path).read_bytes()
        except FileNotFoundError:
            raise TlsConfigError(f"{what} {self.path} ({self.option}): no such file") from None
        except IsADirectoryError:
            raise TlsConfigError(f"{what} {self.path} ({self.option}): a directory, not a file") from None
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise TlsConfigError(f"{what} {self.path} ({self.option}): cannot read it: {reason}") from None
        return data


def _load_ca(context: ssl.SSLContext, ca: _Pem) -> None:
    data = ca.read("CA file")
    try:
        context.load_verify_locations(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError):
        raise TlsConfigError(f"CA file {ca.path} ({ca.option}): no PEM certificate in it") from None


def _load_chain(context: ssl.SSLContext, cert: _Pem, key: _Pem, password: str | None) -> None:
    """The certificate and its key, each parsed first (with ``cryptography``) so that an error
    names the file at fault, then checked to belong together."""
    try:
        certificate = x509.load_pem_x509_certificate(cert.read("certificate"))
    except ValueError:
        raise TlsConfigError(f"certificate {cert.path} ({cert.option}): not a PEM certificate") from None
    private = _private_key(key, password)
    if certificate.public_key().public_bytes(*_SPKI) != private.public_key().public_bytes(*_SPKI):
        raise TlsConfigError(
            f"key {key.path} ({key.option}) does not match certificate {cert.path} ({cert.option})"
        )
    try:
        context.load_cert_chain(cert.path, key.path, password=password)
    except (ssl.SSLError, OSError) as error:  # checked above; a chain file with a broken tail
        raise TlsConfigError(f"certificate {cert.path} ({cert.option}): {error}") from None


_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _private_key(key: _Pem, password: str | None) -> PrivateKeyTypes:
    data = key.read("key")
    try:
        return serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError:  # encrypted without a passphrase, or a passphrase for a plain key
        needs = "is encrypted: give its passphrase" if password is None else "is not encrypted"
        raise TlsConfigError(f"key {key.path} ({key.option}) {needs}") from None
    except ValueError:  # not PEM, or a wrong passphrase
        raise TlsConfigError(
            f"key {key.path} ({key.option}): not a PEM private key, or its passphrase is wrong"
        ) from None
