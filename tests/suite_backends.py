"""The PostgreSQL server and the Redis database the suite uses: the one definition of each.

Neither default is what a cronwheel of the user's own would use (the README's cluster runs on the
``test`` database and Redis database 0):

* ``CRONWHEEL_TEST_POSTGRES_URL``: an administrative URL (its role must be allowed to CREATE
  DATABASE: every test gets a database of its own, dropped afterwards), by default
  ``postgresql://postgres@127.0.0.1:5432/cronwheel_test``. The database it names is the suite's:
  :func:`ensure_postgres_database` creates it, through the server's ``postgres`` maintenance
  database, when it is missing. Set explicitly empty, PostgreSQL is opted out:
  ``CRONWHEEL_TEST_POSTGRES_URL= scripts/test``.
* ``CRONWHEEL_TEST_REDIS_URL``: by default ``redis://127.0.0.1:6379/15``. Each test works under a
  key prefix of its own and deletes its keys; nothing flushes the database.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from cronwheel.store.driver import async_url

POSTGRES_ENV = "CRONWHEEL_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/cronwheel_test"
POSTGRES_URL: str | None = os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL) or None  # "": opted out

REDIS_ENV = "CRONWHEEL_TEST_REDIS_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
REDIS_URL = os.environ.get(REDIS_ENV) or DEFAULT_REDIS_URL

MAINTENANCE_DATABASE = "postgres"  # the database every PostgreSQL server has, to create others from
_NO_SUCH_DATABASE = "3D000"  # SQLSTATE invalid_catalog_name
_DUPLICATE_DATABASE = "42P04"  # SQLSTATE duplicate_database


def postgres_url_with(admin_url: str, *, database: str | None = None, username: str | None = None) -> str:
    """``admin_url`` naming another database or user: the same server, the same form."""
    url = make_url(admin_url)
    if database is not None:
        url = url.set(database=database)
    if username is not None:
        url = url.set(username=username, password=None)
    return url.render_as_string(hide_password=False)


def redis_url_with(*, userinfo: str | None = None, db: int | None = None, scheme: str | None = None) -> str:
    """The suite's Redis URL with other credentials, database number or scheme (the same server)."""
    parts = urlsplit(REDIS_URL)
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = host if userinfo is None else f"{userinfo}@{host}"
    path = parts.path if db is None else f"/{db}"
    return urlunsplit((scheme or parts.scheme, netloc, path, "", ""))


async def _execute(url: str | URL, statement: str) -> None:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


def _sqlstate(error: DBAPIError) -> str | None:
    code = getattr(error.orig, "sqlstate", None)
    return code if isinstance(code, str) else None


async def ensure_postgres_database(url: str) -> None:
    """Make sure the database ``url`` names exists: when connecting says there is no such
    database, create it from the server's maintenance database (a concurrent creation is fine)."""
    target = async_url(url)
    try:
        await _execute(target, "SELECT 1")
        return
    except DBAPIError as error:
        if _sqlstate(error) != _NO_SUCH_DATABASE:
            raise
    name = (target.database or "").replace('"', '""')
    try:
        await _execute(target.set(database=MAINTENANCE_DATABASE), f'CREATE DATABASE "{name}"')
    except DBAPIError as error:
        if _sqlstate(error) != _DUPLICATE_DATABASE:
            raise
    await _execute(target, "SELECT 1")


_ensured: set[str] = set()


async def suite_postgres_url() -> str | None:
    """The suite's PostgreSQL URL, its database made sure of once per process (None: opted out).
    Errors propagate: the caller says what they mean for its tests."""
    if POSTGRES_URL is None:
        return None
    if POSTGRES_URL not in _ensured:
        await ensure_postgres_database(POSTGRES_URL)
        _ensured.add(POSTGRES_URL)
    return POSTGRES_URL
