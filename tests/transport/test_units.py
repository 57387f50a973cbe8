"""Without servers: how backend URLs are printed (cronwheel.redaction), how TLS contexts are built
and refused (cronwheel.tls), and how libpq's and redis-py's URL parameters become them."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from cronwheel.errors import InvalidInputError
from cronwheel.queue.redis_url import client_tls
from cronwheel.redaction import redact_url, scrub, secrets_of
from cronwheel.store.pg_connect import ssl_argument
from cronwheel.tls import ClientTls, ServerTls, TlsConfigError

from .pki import Authority
from .servers import Pki


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("unit-pki"))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://cron:hunter2@db:5432/cron", "postgresql://cron:***@db:5432/cron"),
        (
            "postgresql://cron@db/cron?sslmode=verify-full&sslrootcert=/ca.pem&sslpassword=hunter2",
            "postgresql://cron@db/cron?sslmode=verify-full&sslrootcert=/ca.pem&sslpassword=***",
        ),
        ("postgresql://db/cron?password=hunter2&user=cron", "postgresql://db/cron?password=***&user=cron"),
        ("redis://:hunter2@r:6379/0", "redis://:***@r:6379/0"),
        (
            "rediss://worker:hun%40ter2@r:6380/0?ssl_ca_certs=/ca.pem&ssl_password=hunter2",
            "rediss://worker:***@r:6380/0?ssl_ca_certs=/ca.pem&ssl_password=***",
        ),
        (
            "etcd+https://root:hunter2@e1:2379,e2:2379?cacert=/ca.pem",
            "etcd+https://root:***@e1:2379,e2:2379?cacert=/ca.pem",
        ),
        ("etcd://e1:2379", "etcd://e1:2379"),
        ("sqlite:///var/lib/cronwheel.db", "sqlite:///var/lib/cronwheel.db"),
        ("sqlite:///x.db?token=hunter2#frag", "sqlite:///x.db?token=***#frag"),
        ("redis://u:hunter2@[::1/0", "redis://***"),  # does not parse: the scheme alone
    ],
)
def test_urls_are_printed_without_their_secrets(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "hunter2" not in redact_url(url)
    assert "hun%40ter2" not in redact_url(url)


def test_scrub_takes_a_urls_secrets_out_of_any_text() -> None:
    url = "rediss://worker:hun%40ter:2@r:6380/0?ssl_password=pass%20phrase"
    assert set(secrets_of(url)) >= {"hun%40ter:2", "hun@ter:2", "pass phrase", "pass%20phrase"}
    said = "AUTH worker hun@ter:2 failed; key pass phrase; dsn hun%40ter:2"
    assert scrub(said, url, None) == "AUTH worker *** failed; key ***; dsn ***"


def test_a_server_context_with_a_client_ca_requires_certificates(keys: Pki) -> None:
    context = ServerTls(str(keys.server.cert), str(keys.server.key), str(keys.ca.ca)).context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ServerTls(str(keys.server.cert), str(keys.server.key)).context().verify_mode == ssl.CERT_NONE


def test_tls_files_that_cannot_be_used_are_named_with_their_option(keys: Pki, tmp_path: Path) -> None:
    cert, key = str(keys.server.cert), str(keys.server.key)
    with pytest.raises(TlsConfigError, match=r"certificate .*nope.pem \(--tls-cert\): no such file"):
        ServerTls(str(tmp_path / "nope.pem"), key).context()
    with pytest.raises(TlsConfigError, match=r"\(--tls-cert\): not a PEM certificate"):
        ServerTls(key, key).context()
    with pytest.raises(TlsConfigError, match=r"\(--tls-key\): not a PEM private key"):
        ServerTls(cert, cert).context()
    with pytest.raises(TlsConfigError, match=r"\(--tls-key\) does not match certificate"):
        ServerTls(cert, str(keys.client.key)).context()
    with pytest.raises(TlsConfigError, match=r"\(--tls-cert\): a directory"):
        ServerTls(str(tmp_path), key).context()


def test_an_encrypted_client_key_needs_its_passphrase(keys: Pki, tmp_path: Path) -> None:
    locked = Authority(tmp_path, "locked").issue("locked", "me", server=False, passphrase="open sesame")
    names = ("queue URL ssl_ca_certs", "queue URL ssl_certfile", "queue URL ssl_keyfile")

    def context(password: str | None) -> ssl.SSLContext:
        return ClientTls(str(keys.ca.ca), str(locked.cert), str(locked.key), password, names=names).context()

    with pytest.raises(TlsConfigError, match=r"\(queue URL ssl_keyfile\) is encrypted: give its passphrase"):
        context(None)
    with pytest.raises(TlsConfigError, match="or its passphrase is wrong"):
        context("wrong")
    assert context("open sesame").verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(TlsConfigError, match="needs a client certificate beside it"):
        ClientTls(key=str(locked.key)).context()


@pytest.mark.parametrize(
    ("query", "verify_mode", "check_hostname"),
    [
        ("sslmode=verify-full&sslrootcert={ca}", ssl.CERT_REQUIRED, True),
        ("sslmode=verify-ca&sslrootcert={ca}", ssl.CERT_REQUIRED, False),
        ("sslmode=require&sslrootcert={ca}", ssl.CERT_REQUIRED, False),  # libpq: as verify-ca
        ("sslmode=require", ssl.CERT_NONE, False),
        ("sslmode=verify-full&sslrootcert=system", ssl.CERT_REQUIRED, True),
    ],
)
def test_libpq_ssl_modes_become_asyncpg_contexts(
    keys: Pki, query: str, verify_mode: ssl.VerifyMode, check_hostname: bool
) -> None:
    argument = ssl_argument(dict(part.split("=", 1) for part in query.format(ca=keys.ca.ca).split("&")))
    assert isinstance(argument, ssl.SSLContext)
    assert (argument.verify_mode, argument.check_hostname) == (verify_mode, check_hostname)


def test_libpq_parameters_that_cannot_work_are_refused(keys: Pki) -> None:
    assert ssl_argument({}) is None  # asyncpg's default (prefer), as libpq's
    assert ssl_argument({"sslmode": "disable"}) == "disable"
    assert ssl_argument({"sslmode": "prefer"}) == "prefer"
    with pytest.raises(InvalidInputError, match="sslmode must be one of"):
        ssl_argument({"sslmode": "verify_full"})
    with pytest.raises(InvalidInputError, match="sslrootcert needs sslmode=require"):
        ssl_argument({"sslrootcert": str(keys.ca.ca)})
    with pytest.raises(InvalidInputError, match="given 2 times"):
        ssl_argument({"sslmode": ("require", "disable")})


def test_redis_tls_options_say_how_much_is_verified(keys: Pki) -> None:
    ca = str(keys.ca.ca)
    assert client_tls({"ssl_ca_certs": ca}).verify == "full"
    assert client_tls({"ssl_ca_certs": ca, "ssl_check_hostname": "false"}).verify == "ca"
    assert client_tls({"ssl_cert_reqs": "none"}).verify == "none"
    with pytest.raises(InvalidInputError, match="required or none"):
        client_tls({"ssl_cert_reqs": "optional"})
