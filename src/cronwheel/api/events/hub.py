"""One reader of changes per api process, and the streams it feeds.

:class:`EventHub` runs while at least one stream is open: a pump that turns the job ids of the
process's change source (the in-process :class:`~cronwheel.jobs.service.ChangeFeed` embedded, the
store's ``LISTEN`` in a cluster: :class:`~cronwheel.store.change_listener.PostgresChangeListener`)
into ``job`` changes, and a poller that reads the run events written since its last read
(``store.run_changes``: run states have no notification), the output so far of the running
attempts of the runs that streams follow by id (``store.output_changes``: one read for all of
them) and, while a stream follows ``cluster``, the cluster's status. Each change is offered to
every open :class:`Subscription`, which keeps the ones its caller may hear
(:func:`~cronwheel.api.events.topics.hears`). However many streams are open, the store sees one
reader.

The hub counts the open streams against the operator's limits (``--max-streams``,
``--max-streams-per-caller``): :meth:`EventHub.open` beyond them raises
:class:`TooManyStreamsError` (a 429 problem). A stream that
falls :data:`BACKLOG` changes behind is told ``reload`` in their place.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Protocol

from cronwheel.api.events.topics import (
    CLUSTER,
    RELOAD,
    Change,
    RunWindow,
    Topics,
    hears,
    job_change,
    output_change,
    run_change,
)
from cronwheel.cluster.status import ClusterStatus
from cronwheel.limits import Limits
from cronwheel.store import Store
from cronwheel.store.change_listener import RELOAD_ALL

log = logging.getLogger("cronwheel.api.events")

BACKLOG = 256  # changes a stream may hold unsent before it is told to reload instead
POLL_S = 1.0  # between two reads of the run events
CLUSTER_EVERY = 5  # polls between two reads of the cluster's status (while a stream follows it)
READ_LIMIT = 500  # run events per read
HEARTBEAT_S = 15.0  # a stream's silence before it sends a comment
LIFETIME_S = 300.0  # a stream's length: then the client reconnects (and is authenticated again)
RETRY_MS = 2000  # how long a client waits before it reconnects


class TooManyStreamsError(Exception):
    """An event stream beyond the operator's limits (the route answers 429 with this message)."""


class ChangeSource(Protocol):
    """Where this process hears that a job changed (job ids; ``*``: re-read everything)."""

    def subscribe(self) -> asyncio.Queue[str]: ...

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None: ...


class Subscription:
    """One open stream: its caller, what it follows, and the changes waiting to be sent."""

    def __init__(self, caller: str, teams: frozenset[str] | None, topics: Topics) -> None:
        self.caller, self.teams, self.topics = caller, teams, topics
        self._waiting: asyncio.Queue[Change] = asyncio.Queue(BACKLOG)

    def offer(self, change: Change) -> None:
        if not hears(self.topics, self.teams, change):
            return
        try:
            self._waiting.put_nowait(change)
        except asyncio.QueueFull:  # fallen behind: what it missed is told as one reload
            while not self._waiting.empty():
                self._waiting.get_nowait()
            self._waiting.put_nowait(RELOAD)

    async def next(self, timeout_s: float) -> Change | None:
        """The next change, or None after ``timeout_s`` without one."""
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self._waiting.get(), timeout_s)
        return None


class EventHub:
    """The streams of one api process and the one reader that feeds them (module docstring)."""

    def __init__(
        self,
        store: Store,
        limits: Callable[[], Limits],
        changes: ChangeSource | None,
        cluster: ClusterStatus | None,
        poll_s: float = POLL_S,
    ) -> None:
        self.store, self.limits, self.changes, self.cluster = store, limits, changes, cluster
        self.poll_s = poll_s
        self.heartbeat_s, self.lifetime_s = HEARTBEAT_S, LIFETIME_S  # of each stream (:mod:`.stream`)
        self._open: list[Subscription] = []
        self._tasks: list[asyncio.Task[None]] = []

    def __len__(self) -> int:
        return len(self._open)

    def streams_of(self, caller: str) -> int:
        return sum(1 for subscription in self._open if subscription.caller == caller)

    def open(self, caller: str, teams: frozenset[str] | None, topics: Topics) -> Subscription:
        """A subscription for ``caller`` (counted until :meth:`close`); 429 beyond the limits."""
        limits = self.limits()
        if len(self._open) >= limits.max_streams:
            raise TooManyStreamsError(
                f"this server holds its {limits.max_streams} event streams (--max-streams)"
            )
        if self.streams_of(caller) >= limits.max_streams_per_caller:
            raise TooManyStreamsError(
                f"this caller holds {limits.max_streams_per_caller} event streams already "
                "(--max-streams-per-caller); close one first"
            )
        subscription = Subscription(caller, teams, topics)
        self._open.append(subscription)
        if not self._tasks:
            self._start()
        return subscription

    async def close(self, subscription: Subscription) -> None:
        if subscription in self._open:
            self._open.remove(subscription)
        if not self._open:
            tasks, self._tasks = self._tasks, []
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def publish(self, change: Change) -> None:
        for subscription in list(self._open):
            subscription.offer(change)

    # -- the reader ------------------------------------------------------------------------------

    def _start(self) -> None:
        self._tasks = [asyncio.create_task(self._poll(), name="events-poll")]
        if self.changes is not None:
            queue = self.changes.subscribe()
            self._tasks.append(asyncio.create_task(self._pump(self.changes, queue), name="events-jobs"))

    async def _pump(self, source: ChangeSource, queue: asyncio.Queue[str]) -> None:
        try:
            while True:
                ids = {await queue.get()}
                while not queue.empty():
                    ids.add(queue.get_nowait())
                await self._guarded(self._jobs_changed(ids))
        finally:
            source.unsubscribe(queue)

    async def _jobs_changed(self, ids: set[str]) -> None:
        if RELOAD_ALL in ids:
            self.publish(RELOAD)
            ids.discard(RELOAD_ALL)
        live = await self.store.get_jobs(sorted(ids))
        for job_id in sorted(ids):
            job = live.get(job_id)
            if job is not None:
                self.publish(job_change(job_id, job.team, job.version))
                continue
            team = await self.store.job_team(job_id)
            if team is not None:
                self.publish(job_change(job_id, team, None))

    async def _poll(self) -> None:
        newest = await self._retrying(lambda: self.store.run_changes(None, 1))
        window = RunWindow(floor=newest[0].event_id if newest else 0)
        told: dict[tuple[str, int], datetime] = {}  # (run, attempt) -> its output so far last told
        last_cluster: str | None = None
        polls = 0
        while True:
            await asyncio.sleep(self.poll_s)
            await self._guarded(self._runs_changed(window))
            await self._guarded(self._outputs_changed(told))
            polls += 1
            if polls % CLUSTER_EVERY == 0 and self.cluster is not None and self._follows_cluster():
                last_cluster = await self._cluster_changed(self.cluster, last_cluster)

    async def _runs_changed(self, window: RunWindow) -> None:
        while True:
            read = await self.store.run_changes(window.after, READ_LIMIT)
            for change in window.take(read):
                self.publish(run_change(change))
            if len(read) < READ_LIMIT:
                return

    async def _outputs_changed(self, told: dict[tuple[str, int], datetime]) -> None:
        """One read of the output so far of the running attempts of every run a stream follows
        by id (``run:<id>``); each output written since it was last told is told once."""
        followed = sorted({run_id for s in self._open for run_id in s.topics.run_ids})
        if not followed:
            told.clear()
            return
        seen: dict[tuple[str, int], datetime] = {}
        for change in await self.store.output_changes(followed):
            key = (change.run_id, change.attempt)
            seen[key] = change.at
            if told.get(key) != change.at:
                self.publish(output_change(change))
        told.clear()
        told.update(seen)

    def _follows_cluster(self) -> bool:
        return any(subscription.topics.cluster for subscription in self._open)

    async def _cluster_changed(self, cluster: ClusterStatus, last: str | None) -> str | None:
        try:
            snapshot = await cluster.snapshot()
        except Exception as error:  # a backend away: the next read tries again
            log.warning("cluster status unreadable for events", extra={"error": str(error)})
            return last
        digest = hashlib.sha256(json.dumps(snapshot, sort_keys=True, default=str).encode()).hexdigest()
        if last is not None and digest != last:
            self.publish(CLUSTER)
        return digest

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        """``work``; a store that failed is logged and every stream told to reload (what the
        read would have told is unknown), and the reader goes on."""
        try:
            await work
        except Exception as error:
            log.warning("live events: a read failed", extra={"error": str(error)})
            self.publish(RELOAD)

    async def _retrying(self, read: Callable[[], Coroutine[Any, Any, list[Any]]]) -> list[Any]:
        while True:
            try:
                return await read()
            except Exception as error:
                log.warning("live events: a read failed", extra={"error": str(error)})
                await asyncio.sleep(self.poll_s)
