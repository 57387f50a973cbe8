"""Choosing and opening backends from URLs (the one place that knows every technology).

| setting | embedded (default) | cluster |
|---|---|---|
| ``CRONWHEEL_DATABASE_URL`` | ``sqlite:///cronwheel.db`` | ``postgresql://user@host:5432/db`` |
| ``CRONWHEEL_COORDINATOR_URL`` | unset: this process owns every shard | ``etcd://host:2379[,host:2379...]`` |
| ``CRONWHEEL_QUEUE_URL`` | unset: in-process queue | ``redis://host:6379/0`` |

etcd over TLS and with credentials: ``etcd+https://user:password@host:2379?cacert=...`` (:func:`etcd_config`).

A backend that is down at start is waited for with exponential backoff, and the wait is logged:
a process never fires without its backends, and never crash-loops because one is late.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from cronwheel.clock import Clock
from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.etcd_api import EtcdConfig
from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.errors import InvalidInputError, PermanentError
from cronwheel.queue import Queue
from cronwheel.queue.memory import MemoryQueue
from cronwheel.store.sql import SqlStore, open_store

log = logging.getLogger("cronwheel.backends")

T = TypeVar("T")


async def with_backoff(name: str, connect: Callable[[], Awaitable[T]], *, max_delay_s: float = 30.0) -> T:
    """``connect()`` until it succeeds, waiting 0.5 s, 1 s, 2 s ... (capped) between tries.
    Errors that retrying cannot fix (bad URL, refused input) are raised at once."""
    delay = 0.5
    attempt = 1
    while True:
        try:
            return await connect()
        except (PermanentError, InvalidInputError):
            raise
        except Exception as error:  # any connection failure is worth another try
            log.warning(
                "backend unavailable, retrying",
                extra={
                    "action": "wait",
                    "backend": name,
                    "attempt": attempt,
                    "retry_in_s": delay,
                    "error": str(error),
                },
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay_s)
        attempt += 1


async def connect_store(url: str) -> SqlStore:
    return await with_backoff("database", lambda: open_store(url))


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme.startswith(("postgres", "postgresql"))


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
        raise InvalidInputError(f"coordinator URL must look like {_ETCD_FORM}, not {_redacted(url)!r}")
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


def _redacted(url: str) -> str:
    """``url`` without its credentials, fit for an error message or a log line."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


async def open_queue(url: str | None, clock: Clock, visibility_timeout_s: float) -> Queue:
    if not url:
        return MemoryQueue(clock, visibility_timeout_s=visibility_timeout_s)
    if urlsplit(url).scheme not in ("redis", "rediss"):
        raise InvalidInputError(f"queue URL must be redis://host:port[/db], not {url!r}")
    from cronwheel.queue.streams import RedisStreamQueue  # noqa: PLC0415 - cluster only

    queue = RedisStreamQueue(url, clock, visibility_timeout_s=visibility_timeout_s)
    await with_backoff("queue", queue.ping)
    return queue


async def open_coordinator(
    url: str | None, node: str, roles: tuple[str, ...], clock: Clock, ttl_s: float
) -> Coordinator:
    if not url:
        coordinator: Coordinator = LocalCoordinator(node, roles, clock)
    else:
        from cronwheel.coordinator.etcd import EtcdCoordinator  # noqa: PLC0415 - cluster only

        coordinator = EtcdCoordinator.connect(etcd_config(url), node, roles, clock, ttl_s=ttl_s)
    await with_backoff("coordinator", coordinator.start)
    return coordinator
