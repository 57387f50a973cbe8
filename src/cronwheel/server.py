"""``cronwheel server``: every role in one process over the embedded backends.

The API, the scheduler, the sweeper and a worker pool run as named tasks in one task group: if one
dies the others are stopped and the process exits non-zero, instead of limping on. SIGTERM and
SIGINT stop it gracefully: the API stops accepting, the scheduler stops firing, running attempts
get a grace period to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import uvicorn

from cronwheel.api.app import ApiServices, create_app
from cronwheel.clock import SystemClock
from cronwheel.errors import PermanentError
from cronwheel.queue.memory import MemoryQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.scheduler.sweeper import Sweeper
from cronwheel.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.store import Store
from cronwheel.store.sql import open_store
from cronwheel.worker.executors import Executors
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.loop import Worker

log = logging.getLogger("cronwheel.server")


def default_node() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    database_url: str = "sqlite:///cronwheel.db"
    allow_commands: bool = False
    python_allow: tuple[str, ...] = ()
    allowed_networks: tuple[str, ...] = ()
    concurrency: int = 64
    queues: tuple[str, ...] = ("default",)
    lease_s: float = 30.0
    node: str = field(default_factory=default_node)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process handles SIGTERM once, for all roles."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(settings: ServerSettings, announce: Callable[[str], None] = print) -> None:
    """Run every role until SIGTERM/SIGINT (or until one role fails)."""
    with _single_owner(settings.database_url):
        store = await open_store(settings.database_url)  # migrates to the newest schema first
        try:
            await _run_roles(settings, store, announce)
        finally:
            await store.close()


async def _run_roles(settings: ServerSettings, store: Store, announce: Callable[[str], None]) -> None:
    clock = SystemClock()
    queue = MemoryQueue(clock, visibility_timeout_s=settings.lease_s * 2)
    feed = ChangeFeed()
    policy = TargetPolicy(
        settings.allow_commands, settings.python_allow, settings.allowed_networks, queues=settings.queues
    )
    service = JobService(store, queue, feed, clock, policy)
    worker_settings = WorkerSettings(
        allow_commands=settings.allow_commands,
        python_allow=settings.python_allow,
        allowed_networks=settings.allowed_networks,
    )
    executors = Executors(worker_settings)
    scheduler = Scheduler(store, queue, clock, settings.node)
    sweeper = Sweeper(store, queue, clock)
    worker = Worker(
        store,
        queue,
        executors,
        clock,
        settings.node,
        queues=settings.queues,
        concurrency=settings.concurrency,
        lease_s=settings.lease_s,
    )
    await sweeper.recover_after_restart(clock.now())
    app = create_app(ApiServices(store=store, job_service=service, clock=clock))
    server = _Server(
        uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False)
    )
    stop = asyncio.Event()
    _on_signals(stop)
    changes = feed.subscribe()
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(_api(server, stop, announce, settings), name="api")
            group.create_task(_until_stop(scheduler.run(changes, stop), stop), name="scheduler")
            group.create_task(_until_stop(sweeper.run(stop), stop), name="sweeper")
            group.create_task(_until_stop(worker.run(stop), stop), name="worker")
    finally:
        await executors.close()
        await queue.close()


async def _api(
    server: _Server, stop: asyncio.Event, announce: Callable[[str], None], settings: ServerSettings
) -> None:
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        announce(f"cronwheel serving on http://{settings.host}:{port} (node {settings.node})")
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopper}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    stopper.cancel()
    await serving
    stop.set()  # the API ended (stopped, or failed to bind): stop every role


async def _until_stop(role: Awaitable[None], stop: asyncio.Event) -> None:
    try:
        await role
    finally:
        stop.set()


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


@contextlib.contextmanager
def _single_owner(database_url: str) -> Iterator[None]:
    """Embedded mode owns its SQLite file alone: a second server on the same file would break the
    restart recovery (which treats every lease as orphaned). A lock file enforces it."""
    path = _sqlite_path(database_url)
    if path is None:
        yield
        return
    lock_path = Path(f"{path}.lock")
    handle: IO[str] = lock_path.open("a")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PermanentError(f"another cronwheel server is using {path} (lock {lock_path})") from None
        yield
    finally:
        handle.close()


def _sqlite_path(url: str) -> str | None:
    for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
        if url.startswith(prefix):
            rest = url[len(prefix) :].split("?", 1)[0]
            return None if rest in ("", ":memory:") else rest
    return None
