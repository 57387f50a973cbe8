"""Running a node: ``cronwheel server`` (every role, embedded backends by default) and
``cronwheel api|scheduler|worker`` (one role each, cluster backends).

The API, the scheduler, the sweeper and a worker pool run as named tasks in one task group: if one
dies the others are stopped and the process exits non-zero, instead of limping on. SIGTERM and
SIGINT stop it gracefully: the API stops accepting, the scheduler stops firing, running attempts
get a grace period to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
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
from cronwheel.backends import connect_store, is_postgres, open_coordinator, open_queue, with_backoff
from cronwheel.clock import AnchoredClock, Clock, SystemClock
from cronwheel.cluster import ClusterStatus
from cronwheel.coordinator import Coordinator
from cronwheel.errors import PermanentError
from cronwheel.queue import Queue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.scheduler.sweeper import Sweeper
from cronwheel.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.store.notify import PostgresChangeListener
from cronwheel.store.sql import SqlStore
from cronwheel.timekeeping import anchor_once, keep_anchored
from cronwheel.worker.executors import Executors
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.loop import Worker

log = logging.getLogger("cronwheel.server")

# The cyclic garbage collector's thresholds for a node (issue #6): a young collection every 50,000
# net allocations instead of 700, and full collections ten times rarer. A scheduler holds a large
# heap (every job of the horizon) and allocates fast while firing; with the defaults, full
# collections scanned that heap every few seconds. Measured with ``benchmarks/bench_fire.py``
# (steady, 100,000 jobs, embedded): time in the collector 3.2 s -> 0.7 s over the run, p99 queued
# lateness 442 -> 228 ms. Cycles are still collected, only in bigger, rarer passes.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_collector() -> None:
    """Set :data:`GC_THRESHOLDS` and move what start-up created (modules, settings) out of the
    collector's scans (``gc.freeze``). Call it once per process, before serving."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def default_node() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


ALL_ROLES = ("api", "scheduler", "worker")


@dataclass(frozen=True, slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    database_url: str = "sqlite:///cronwheel.db"
    coordinator_url: str | None = None  # etcd://host:port[,...]; None: this process owns every shard
    queue_url: str | None = None  # redis://host:port; None: in-process queue
    roles: tuple[str, ...] = ALL_ROLES
    allow_commands: bool = False
    python_allow: tuple[str, ...] = ()
    allowed_networks: tuple[str, ...] = ()
    concurrency: int = 64
    queues: tuple[str, ...] = ("default",)
    lease_s: float = 30.0
    ttl_s: float = 5.0  # coordinator membership / shard lease TTL
    node: str = field(default_factory=default_node)

    @property
    def embedded(self) -> bool:
        return not self.coordinator_url and not self.queue_url and not is_postgres(self.database_url)

    def check(self) -> None:
        """Refuse combinations that cannot work, before touching any backend."""
        unknown = set(self.roles) - set(ALL_ROLES)
        if unknown or not self.roles:
            raise PermanentError(f"roles must be among {', '.join(ALL_ROLES)}, not {sorted(unknown)}")
        if self.embedded and set(self.roles) != set(ALL_ROLES):
            raise PermanentError(
                "the embedded backends (SQLite, in-process queue and coordinator) need every role in one "
                "process: run `cronwheel server`, or set CRONWHEEL_DATABASE_URL=postgresql://..., "
                "CRONWHEEL_COORDINATOR_URL=etcd://... and CRONWHEEL_QUEUE_URL=redis://..."
            )
        if not self.embedded and not (
            self.queue_url and self.coordinator_url and is_postgres(self.database_url)
        ):
            raise PermanentError(
                "cluster mode needs all three: CRONWHEEL_DATABASE_URL=postgresql://..., "
                "CRONWHEEL_COORDINATOR_URL=etcd://... and CRONWHEEL_QUEUE_URL=redis://..."
            )


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process handles SIGTERM once, for all roles."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(settings: ServerSettings, announce: Callable[[str], None] = print) -> None:
    """Run this node's roles until SIGTERM/SIGINT (or until one role fails)."""
    settings.check()
    with _single_owner(settings.database_url) if settings.embedded else contextlib.nullcontext():
        store = await connect_store(settings.database_url)  # migrates to the newest schema first
        try:
            await _run_roles(settings, store, announce)
        finally:
            await store.close()


async def _run_roles(settings: ServerSettings, store: SqlStore, announce: Callable[[str], None]) -> None:
    clock: Clock = SystemClock()
    if not settings.embedded:  # cluster: every node fires, leases and records by the store's clock
        anchored = AnchoredClock()
        await with_backoff("store clock", lambda: anchor_once(anchored, store))
        clock = anchored
    queue = await open_queue(settings.queue_url, clock, visibility_timeout_s=settings.lease_s * 2)
    coordinator = await open_coordinator(
        settings.coordinator_url, settings.node, settings.roles, clock, settings.ttl_s
    )
    stop = asyncio.Event()
    _on_signals(stop)
    closers: list[Callable[[], Awaitable[None]]] = [queue.close, coordinator.stop]
    try:
        async with asyncio.TaskGroup() as group:
            roles = _Roles(settings, store, queue, coordinator, clock, stop, group, closers)
            await roles.start(announce)
    finally:
        for close in closers:
            with contextlib.suppress(Exception):
                await close()


@dataclass
class _Roles:
    """Builds and starts the roles this node runs, each as a named task."""

    settings: ServerSettings
    store: SqlStore
    queue: Queue
    coordinator: Coordinator
    clock: Clock
    stop: asyncio.Event
    group: asyncio.TaskGroup
    closers: list[Callable[[], Awaitable[None]]]

    async def start(self, announce: Callable[[str], None]) -> None:
        roles = self.settings.roles
        feed = ChangeFeed()
        if isinstance(self.clock, AnchoredClock):
            self._task(keep_anchored(self.clock, self.store, self.stop, self.settings.node), "clock")
        if "scheduler" in roles:
            await self._scheduler(feed)
        if "worker" in roles:
            self._worker()
        if "api" in roles:
            self._api(feed, announce)
        else:
            announce(f"cronwheel {'+'.join(roles)} running (node {self.settings.node})")

    def _task(self, role: Awaitable[None], name: str) -> None:
        self.group.create_task(_until_stop(role, self.stop), name=name)

    async def _scheduler(self, feed: ChangeFeed) -> None:
        settings = self.settings
        if settings.embedded:
            changes = feed.subscribe()
            ownership: Coordinator | None = None
        else:
            listener = PostgresChangeListener(settings.database_url)
            changes = listener.subscribe()
            await listener.start()
            self.closers.append(listener.stop)
            ownership = self.coordinator
        scheduler = Scheduler(
            self.store, self.queue, self.clock, settings.node, ownership=ownership, stall_s=settings.ttl_s
        )
        self.coordinator.set_health_check(scheduler.healthy)
        # a cluster sweeps every second: a scheduler killed between its store commit and its queue
        # publish leaves PENDING runs that only the sweep queues, and their lateness is this period
        sweeper = Sweeper(self.store, self.queue, self.clock, every_s=5.0 if settings.embedded else 1.0)
        if settings.embedded:
            await sweeper.recover_after_restart(self.clock.now())
        leader = None if settings.embedded else self._is_leader
        self._task(scheduler.run(changes, self.stop), "scheduler")
        self._task(sweeper.run(self.stop, leader), "sweeper")

    async def _is_leader(self) -> bool:
        return await self.coordinator.leader() == self.settings.node

    def _worker(self) -> None:
        settings = self.settings
        executors = Executors(
            WorkerSettings(
                allow_commands=settings.allow_commands,
                python_allow=settings.python_allow,
                allowed_networks=settings.allowed_networks,
            )
        )
        self.closers.append(executors.close)
        worker = Worker(
            self.store,
            self.queue,
            executors,
            self.clock,
            settings.node,
            queues=settings.queues,
            concurrency=settings.concurrency,
            lease_s=settings.lease_s,
        )
        self._task(worker.run(self.stop), "worker")

    def _api(self, feed: ChangeFeed, announce: Callable[[str], None]) -> None:
        settings = self.settings
        policy = TargetPolicy(
            settings.allow_commands, settings.python_allow, settings.allowed_networks, queues=settings.queues
        )
        service = JobService(self.store, self.queue, feed, self.clock, policy)
        status = ClusterStatus(self.store, self.queue, self.coordinator, settings.queues)
        app = create_app(ApiServices(store=self.store, job_service=service, clock=self.clock, cluster=status))
        config = uvicorn.Config(
            app, host=settings.host, port=settings.port, log_config=None, access_log=False
        )
        self.group.create_task(_serve_api(_Server(config), self.stop, announce, settings), name="api")


async def _serve_api(
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
