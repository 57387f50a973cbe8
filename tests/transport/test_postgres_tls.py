"""The store over TLS with credentials, against a private PostgreSQL with ``ssl=on`` that accepts
``hostssl`` connections only (``servers.TlsPostgres``): libpq's ``sslmode``, ``sslrootcert``,
``sslcert`` and ``sslkey`` in the store URL, a password in the URL or in a passfile."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from cronwheel.model import RunState
from cronwheel.node.backends import connect_store
from cronwheel.store.change_listener import PostgresChangeListener
from cronwheel.store.driver import StoreRefusedError
from cronwheel.store.sql import SqlStore
from cronwheel.tls import TlsConfigError

from .servers import PASSFILE_PASSWORD, PG_PASSWORD, Pki, TlsPostgres, in_url


def _leaks(message: str) -> bool:
    return PG_PASSWORD in message or in_url(PG_PASSWORD) in message


async def _ssl_of_session(store: SqlStore) -> tuple[bool, str]:
    async with store.engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            )
        ).one()
    return bool(row[0]), str(row[1])


async def test_verify_full_with_a_password_migrates_and_serves_the_store(tls_postgres: TlsPostgres) -> None:
    store = await connect_store(tls_postgres.url(tls_postgres.verified()))
    try:
        assert await _ssl_of_session(store) == (True, "TLSv1.3")
        assert isinstance(await store.count_runs((RunState.PENDING,)), dict)  # the database is shared
        assert isinstance(await store.shard_owners(), dict)  # by this directory's tests
    finally:
        await store.close()


async def test_the_job_change_listener_connects_over_the_same_tls(tls_postgres: TlsPostgres) -> None:
    """The listener opens its own asyncpg connection: it gets the same ``ssl`` argument (a plain
    connection would be refused by pg_hba.conf)."""
    url = tls_postgres.url(tls_postgres.verified())
    store = await connect_store(url)
    listener = PostgresChangeListener(url)
    try:
        changes = listener.subscribe()
        await listener.start()
        async with store.engine.begin() as connection:
            await connection.execute(text("SELECT pg_notify('cronwheel_jobs', 'job-1')"))
        assert await asyncio.wait_for(changes.get(), 5) == "job-1"
    finally:
        await listener.stop()
        await store.close()


async def test_a_client_certificate_authenticates_without_a_password(
    tls_postgres: TlsPostgres, pki: Pki
) -> None:
    url = tls_postgres.url(tls_postgres.verified(client=pki.pg_client), user="cw_cert", password=None)
    store = await connect_store(url)
    try:
        assert (await _ssl_of_session(store))[0]
    finally:
        await store.close()


async def test_a_password_from_a_passfile(tls_postgres: TlsPostgres, tmp_path: Path) -> None:
    """A ~/.pgpass-format file (asyncpg reads it; it does not unescape a \\: in the password)."""
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{tls_postgres.port}:cronwheel:cw_file:{PASSFILE_PASSWORD}\n")
    passfile.chmod(0o600)
    url = tls_postgres.url(f"{tls_postgres.verified()}&passfile={passfile}", user="cw_file", password=None)
    store = await connect_store(url)
    await store.close()


async def test_sslmode_require_encrypts_without_verifying(tls_postgres: TlsPostgres) -> None:
    store = await connect_store(tls_postgres.url("sslmode=require"))
    try:
        assert (await _ssl_of_session(store))[0]
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("sslmode=disable", "no pg_hba.conf entry"),  # plain, to a server that has only hostssl lines
        ("sslmode=verify-full&sslrootcert={other}", "certificate verify failed"),  # another CA
    ],
    ids=["plain", "wrong-ca"],
)
async def test_refusals_are_permanent_at_once_and_never_quote_the_password(
    tls_postgres: TlsPostgres, pki: Pki, query: str, says: str
) -> None:
    url = tls_postgres.url(query.format(other=pki.other.ca))
    began = time.monotonic()
    with pytest.raises(StoreRefusedError) as refused:
        await connect_store(url)
    assert time.monotonic() - began < 5  # not waited for as an outage (CONNECT retries)
    assert says in str(refused.value)
    assert not _leaks(str(refused.value))


async def test_a_wrong_password_is_refused_without_quoting_it(tls_postgres: TlsPostgres) -> None:
    url = tls_postgres.url(tls_postgres.verified(), password=PG_PASSWORD + "x")
    with pytest.raises(StoreRefusedError, match="password authentication failed") as refused:
        await connect_store(url)
    assert not _leaks(str(refused.value))


async def test_the_certificate_user_without_a_certificate_is_refused(tls_postgres: TlsPostgres) -> None:
    url = tls_postgres.url(tls_postgres.verified(), user="cw_cert", password=None)
    with pytest.raises(StoreRefusedError, match="certificate"):
        await connect_store(url)


async def test_unusable_tls_files_stop_before_connecting(
    tls_postgres: TlsPostgres, pki: Pki, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(TlsConfigError, match=rf"{missing} \(store URL sslrootcert\): no such file"):
        await connect_store(tls_postgres.url(f"sslmode=verify-full&sslrootcert={missing}"))
    mismatched = f"{tls_postgres.verified()}&sslcert={pki.pg_client.cert}&sslkey={pki.client.key}"
    with pytest.raises(TlsConfigError, match="does not match certificate"):
        await connect_store(tls_postgres.url(mismatched))
