"""Job-change notifications across processes: PostgreSQL ``LISTEN``/``NOTIFY``.

:class:`~cronwheel.store.sql.SqlStore` on PostgreSQL sends ``pg_notify('cronwheel_jobs', job_id)``
in the same transaction as every job write (``create_job``, ``update_job``, ``delete_job``,
``record_skipped``), so a notification is delivered when, and only if, the change commits. The
payload is only the job id; listeners re-read the job from the store.

:class:`PostgresChangeListener` is the cluster's counterpart of the in-process
``cronwheel.jobs.service.ChangeFeed``: it holds one dedicated asyncpg connection (outside any pool)
that ``LISTEN``\\ s on :data:`CHANNEL` and puts each job id on every subscriber's
``asyncio.Queue[str]``. PostgreSQL does not keep notifications for a listener that is not
connected, so after losing its connection (server restart, ``pg_terminate_backend``, a network
failure found by the periodic health check) it reconnects with exponential backoff (a
:class:`~cronwheel.retrying.Backoff`) and then puts :data:`RELOAD_ALL` (``"*"``) on every queue:
"changes may have been missed, re-read everything". A server that answers and refuses the
connection (credentials, database: :class:`~cronwheel.store.driver.StoreRefusedError`) ends the
listener with that error, which :meth:`PostgresChangeListener.supervise` raises to stop the
process: waiting would not help.

Start it before the scheduler's first full load, so no change falls between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import TracebackType
from typing import Any

from sqlalchemy.engine import make_url

from cronwheel.errors import InvalidInputError
from cronwheel.retrying import Backoff, retry
from cronwheel.store.driver import async_url, connect_error
from cronwheel.store.pg_connect import connect_arguments

CHANNEL = "cronwheel_jobs"
RELOAD_ALL = "*"  # not a job id: "notifications may have been lost, reload every job"

log = logging.getLogger("cronwheel.store.notify")


def listener_dsn(url: str) -> str:
    """A DSN asyncpg accepts for a store URL (``postgresql://``, ``postgres://`` or
    ``postgresql+asyncpg://``)."""
    parsed = async_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise InvalidInputError(
            f"job-change notifications need a PostgreSQL store, not {parsed.drivername!r}"
        )
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresChangeListener:
    """``LISTEN cronwheel_jobs`` on a dedicated connection; job ids to every subscriber's queue.

    ``start()`` connects and listens (raising ``BackendUnavailableError`` when it cannot, and
    ``StoreRefusedError`` when the server refuses the URL), then a background task keeps the
    connection: every ``health_check_s`` it runs ``SELECT 1`` (a connection that silently stopped
    answering counts as lost), and after a loss it reconnects with exponential backoff
    (``min_backoff_s`` doubling up to ``max_backoff_s``, jittered by half; the first retry is
    immediate) for as long as it runs, then signals :data:`RELOAD_ALL`.

    ``name`` (default ``job-change-listener``) names it in logs and retries, ``subject`` (default
    ``job changes``) in errors, ``application_name`` its connection in ``pg_stat_activity``: other
    channels (the trigger queue's wake-ups, ``cronwheel.queue.postgres``) use the same machinery.
    """

    def __init__(
        self,
        url: str,
        *,
        channel: str = CHANNEL,
        min_backoff_s: float = 0.1,
        max_backoff_s: float = 5.0,
        health_check_s: float = 10.0,
        timeout_s: float = 5.0,
        name: str = "job-change-listener",
        subject: str = "job changes",
        application_name: str = "cronwheel-listener",
    ) -> None:
        self._dsn = listener_dsn(url)
        self.name, self._subject, self._application_name = name, subject, application_name
        self._tls = connect_arguments(make_url(url).query)  # async_url took sslmode and its files out
        self.channel = channel
        self._backoff = Backoff(first_s=min_backoff_s, multiplier=2.0, cap_s=max_backoff_s, jitter=0.5)
        self._health_check_s = health_check_s
        self._timeout_s = timeout_s
        self._subscribers: list[asyncio.Queue[str]] = []
        self._connection: Any = None  # asyncpg.Connection (asyncpg ships no type information)
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.reconnects = 0  # connections re-established after a loss

    # -- the consumer side -------------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue[str]:
        """A new queue that receives every job id (and :data:`RELOAD_ALL`) from now on."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        """Stop filling ``queue`` (one that was not subscribed is ignored)."""
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    @property
    def listening(self) -> bool:
        return self._connection is not None and not self._lost.is_set()

    @property
    def running(self) -> bool:
        """Started and not ended (stopped, or by a reconnect the server refused)."""
        return self._task is not None and not self._task.done()

    @property
    def server_pid(self) -> int | None:
        """The PostgreSQL backend process of the listening connection (diagnostics, tests)."""
        if self._connection is None:
            return None
        pid: int = self._connection.get_server_pid()
        return pid

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        await self._connect_translated(f"cannot listen for {self._subject}")
        self._task = asyncio.create_task(self._keep(), name=f"listen {self.channel}")

    async def supervise(self, stop: asyncio.Event) -> None:
        """Wait until ``stop`` (or until the listener is stopped); raise the error that ended the
        listener, if one did (a reconnect the server refused), so that the process stops."""
        task = self._task
        if task is None:
            return
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # an error it ended with is supervise()'s to raise, not stop()'s
            if not task.cancelled():
                task.exception()  # retrieved: asyncio would otherwise report it as never retrieved
        await self._drop(graceful=True)

    async def __aenter__(self) -> PostgresChangeListener:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.stop()

    # -- the connection ------------------------------------------------------------------------

    async def _connect_translated(self, what: str) -> None:
        """:meth:`_connect`, its failures as cronwheel errors (``store.driver.connect_error``)."""
        try:
            await self._connect()
        except Exception as error:
            translated = connect_error(error, what)
            if translated is error:
                raise
            raise translated from error

    async def _connect(self) -> None:
        import asyncpg  # noqa: PLC0415 (embedded mode never needs it)

        connection = await asyncpg.connect(
            self._dsn,
            timeout=self._timeout_s,
            server_settings={"application_name": self._application_name},
            **self._tls,
        )
        lost = asyncio.Event()
        try:
            connection.add_termination_listener(lambda _connection: lost.set())
            await asyncio.wait_for(connection.add_listener(self.channel, self._deliver), self._timeout_s)
            if connection.is_closed():  # lost before the termination listener was in place
                lost.set()
        except BaseException:
            connection.terminate()
            raise
        self._connection, self._lost = connection, lost

    def _deliver(self, _connection: object, _pid: int, _channel: str, payload: str) -> None:
        if payload:
            self._publish(payload)

    def _publish(self, item: str) -> None:
        for queue in self._subscribers:
            queue.put_nowait(item)

    async def _keep(self) -> None:
        while True:
            await self._watch()
            await self._drop(graceful=False)
            await self._reconnect()
            self.reconnects += 1
            log.info(
                "%s reconnected",
                self.name.replace("-", " "),
                extra={"action": "listen", "channel": self.channel, "reconnects": self.reconnects},
            )
            self._publish(RELOAD_ALL)

    async def _watch(self) -> None:
        """Return when the connection is lost (closed by the server or the network, or
        unresponsive to a health check)."""
        # asyncio.timeout, not asyncio.wait_for: on Python 3.11 wait_for can swallow a cancellation
        # that arrives as its awaitable finishes, and this loop would outlive stop()
        while not self._lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._health_check_s):
                    await self._lost.wait()
                return
            try:
                async with asyncio.timeout(self._timeout_s):
                    await self._connection.fetchval("SELECT 1")
            except Exception as error:  # any failure: treat the connection as gone
                log.warning(
                    "%s health check failed",
                    self.name.replace("-", " "),
                    extra={"channel": self.channel, "error": str(error)},
                )
                return

    async def _reconnect(self) -> None:
        """At once, then with backoff while the server is unavailable (each wait logged
        ``action=wait backend=<name>``); a refusal is raised."""
        await retry(
            self.name,
            lambda: self._connect_translated(f"cannot reconnect to listen for {self._subject}"),
            self._backoff,
        )

    async def _drop(self, *, graceful: bool) -> None:
        connection, self._connection = self._connection, None
        self._lost.set()
        if connection is None or connection.is_closed():
            return
        if graceful:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), self._timeout_s)
                return
        connection.terminate()
