"""Choosing and opening backends from URLs (the one place that knows every technology).

| setting | embedded (default) | cluster |
|---|---|---|
| ``CRONWHEEL_DATABASE_URL`` | ``DEFAULT_DATABASE_URL`` (SQLite) | ``postgresql://user@host:5432/db`` |
| ``CRONWHEEL_COORDINATOR_URL`` | unset: this process owns every shard | ``etcd://host:2379``; unset: rows |
| ``CRONWHEEL_QUEUE_URL`` | unset: in-process queue | ``redis://host:6379/0``; unset: rows |

("rows": the coordinator's and the queue's tables in the store's PostgreSQL database;
:mod:`cronwheel.cluster.mode` names the combinations.)

Over TLS and with credentials: ``postgresql://user:password@host/db?sslmode=verify-full&sslrootcert=...``
(:mod:`cronwheel.store.pg_connect`), ``rediss://user:password@host:6380/0?ssl_ca_certs=...``
(:mod:`cronwheel.queue.redis_url`), ``etcd+https://user:password@host:2379?cacert=...``
(:func:`etcd_config`). A URL is only ever shown through :func:`cronwheel.redaction.redact_url`.

A backend that is down at start is waited for with the :data:`~cronwheel.retrying.CONNECT`
policy, and the wait is logged: a process never fires without its backends, and never crash-loops
because one is late. Only a :class:`~cronwheel.errors.TransientError` is waited out: each backend
translates its connection failures into one (``store/driver.py``, ``queue/streams.py``,
``coordinator/etcd_client.py``), so a bad URL, refused credentials, a schema newer than this code
or a bug stops the process at once with the error.

Each opener is an async context manager that closes what it opened on the way out, so that
:func:`cronwheel.node.server.serve` stacks them (``contextlib.AsyncExitStack``) and a failure in a later
one closes the earlier ones.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlsplit

from alembic.util.exc import CommandError

from cronwheel.clock import Clock
from cronwheel.cluster.mode import is_postgres
from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.etcd_api import EtcdConfig
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.errors import InvalidInputError
from cronwheel.queue import Queue
from cronwheel.queue.memory import MemoryQueue
from cronwheel.redaction import redact_url
from cronwheel.retrying import CONNECT, retry
from cronwheel.store.sql import SchemaOutdatedError, SqlStore, open_store

if TYPE_CHECKING:
    from cronwheel.queue.postgres import PostgresQueue
    from cronwheel.queue.streams import RedisStreamQueue

log = logging.getLogger("cronwheel.backends")


@contextmanager
def schema_errors() -> Iterator[None]:
    """Alembic's "Can't locate revision" (the database was migrated by a newer cronwheel) as a
    :class:`SchemaOutdatedError` that says what to do, instead of a raw traceback."""
    try:
        yield
    except CommandError as error:
        raise SchemaOutdatedError(
            f"the store's schema is not one this cronwheel knows ({error}): it was probably migrated "
            "by a newer cronwheel; run that version (downgrades are not supported)"
        ) from error


async def connect_store(url: str) -> SqlStore:
    """Open the store at ``url``, migrated to the newest schema, waiting for it while it is down."""
    with schema_errors():
        return await retry("database", lambda: open_store(url), CONNECT)


@asynccontextmanager
async def store_at(url: str) -> AsyncIterator[SqlStore]:
    store = await connect_store(url)
    try:
        yield store
    finally:
        await close_quietly("database", store.close)


_ETCD_SCHEMES = {"etcd": "http", "etcd+http": "http", "etcd+https": "https"}
_ETCD_TLS_FILES = {"cacert": "ca_file", "cert": "cert_file", "key": "key_file"}
_ETCD_FORM = "etcd://host:port[,host:port...] or etcd+https://[user:password@]host:port[,...][?cacert=...]"


def etcd_config(url: str) -> EtcdConfig:
    """The etcd cluster of a coordinator URL (the forms are in docs/cluster.md)::

        etcd://h1:2379,h2:2379                          plain HTTP, no authentication
        etcd+https://h1:2379?cacert=/etc/etcd/ca.pem     TLS, servers verified with this CA
        etcd+https://root:secret@h1:2379,h2:2379?cacert=/ca.pem&cert=/me.pem&key=/me.key
                                                        TLS with a client certificate, and
                                                        etcd's auth API as user root

    The user and password are percent-decoded; neither appears in an error message."""
    parts = urlsplit(url)
    scheme = _ETCD_SCHEMES.get(parts.scheme)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    endpoints = tuple(f"{scheme}://{host}" for host in hosts.split(",") if host)
    if scheme is None or not endpoints or parts.path not in ("", "/") or parts.fragment:
        raise InvalidInputError(f"coordinator URL must look like {_ETCD_FORM}, not {redact_url(url)!r}")
    files: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name not in _ETCD_TLS_FILES or not value or name in files:
            raise InvalidInputError(
                f"coordinator URL option {name!r} is not one of cacert=, cert=, key= (each once, a path)"
            )
        files[name] = value
    if files and scheme != "https":
        raise InvalidInputError("cacert=, cert= and key= need an etcd+https:// coordinator URL")
    if "key" in files and "cert" not in files:
        raise InvalidInputError("coordinator URL option key= needs cert= (the client certificate)")
    user, colon, password = userinfo.partition(":")
    if userinfo and not user:
        raise InvalidInputError("the coordinator URL names a password but no user")
    return EtcdConfig(
        endpoints,
        user=unquote(user) if user else None,
        password=unquote(password) if colon else "",
        **{_ETCD_TLS_FILES[name]: path for name, path in files.items()},
    )


async def open_queue(
    url: str | None, clock: Clock, visibility_timeout_s: float, database_url: str | None = None
) -> Queue:
    """The queue at ``url``: Redis Streams; unset, the ``triggers`` table of a PostgreSQL
    ``database_url``, else in-process. Waits for it while it is down; the caller closes it."""
    if not url and not (database_url and is_postgres(database_url)):
        return MemoryQueue(clock, visibility_timeout_s=visibility_timeout_s)
    queue: RedisStreamQueue | PostgresQueue
    if url:
        from cronwheel.queue.streams import RedisStreamQueue  # noqa: PLC0415 - cluster only

        queue = RedisStreamQueue(url, clock, visibility_timeout_s=visibility_timeout_s)
    else:
        from cronwheel.queue.postgres import PostgresQueue  # noqa: PLC0415 - cluster only

        queue = PostgresQueue(str(database_url), clock, visibility_timeout_s=visibility_timeout_s)
    try:
        await retry("queue", queue.ping, CONNECT)
    except BaseException:
        await close_quietly("queue", queue.close)
        raise
    return queue


@asynccontextmanager
async def queue_at(
    url: str | None, clock: Clock, visibility_timeout_s: float, database_url: str | None = None
) -> AsyncIterator[Queue]:
    queue = await open_queue(url, clock, visibility_timeout_s, database_url)
    try:
        yield queue
    finally:
        await close_quietly("queue", queue.close)


async def open_coordinator(
    url: str | None,
    node: str,
    roles: tuple[str, ...],
    clock: Clock,
    ttl_s: float,
    metrics_url: str | None = None,
    database_url: str | None = None,
) -> Coordinator:
    """Join the coordinator at ``url`` (etcd; unset, the rows of a PostgreSQL ``database_url``,
    else this process alone) as ``node`` with ``roles``, saying where its metrics are, waiting for
    it while it is down; the caller stops it. A start that fails cleans up after itself."""
    coordinator: Coordinator
    if url:
        from cronwheel.coordinator.etcd import EtcdCoordinator  # noqa: PLC0415 - cluster only

        config = etcd_config(url)
        coordinator = EtcdCoordinator.connect(
            config, node, roles, clock, ttl_s=ttl_s, metrics_url=metrics_url
        )
    elif database_url and is_postgres(database_url):
        from cronwheel.coordinator.postgres import PostgresCoordinator  # noqa: PLC0415 - cluster only

        coordinator = PostgresCoordinator.connect(
            database_url, node, roles, clock, ttl_s=ttl_s, metrics_url=metrics_url
        )
    else:
        coordinator = LocalCoordinator(node, roles, clock, metrics_url=metrics_url)
    await retry("coordinator", coordinator.start, CONNECT)
    return coordinator


@asynccontextmanager
async def coordinator_at(
    url: str | None,
    node: str,
    roles: tuple[str, ...],
    clock: Clock,
    ttl_s: float,
    metrics_url: str | None = None,
    database_url: str | None = None,
) -> AsyncIterator[Coordinator]:
    coordinator = await open_coordinator(url, node, roles, clock, ttl_s, metrics_url, database_url)
    try:
        yield coordinator
    finally:
        await close_quietly("coordinator", coordinator.stop)


async def close_quietly(name: str, close: Callable[[], Awaitable[None]]) -> None:
    """Run a cleanup, logging instead of raising: one that fails (its backend is down) must not
    keep the others from running, nor hide the error that stopped the process."""
    try:
        await close()
    except Exception as error:
        log.warning("closing failed", extra={"action": "close", "backend": name, "error": str(error)})
