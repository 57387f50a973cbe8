"""``RedisStreamQueue``: the cluster trigger queue, on Redis Streams.

Keys, per queue name (``prefix`` defaults to ``cronwheel``)::

    {prefix}:q:{name}        stream: one entry per trigger (run_id, job_id, queue, and the slot of
                             a trigger released ahead of it; nothing else),
                             read by one consumer group (``group``, default ``workers``)
    {prefix}:delayed:{name}  sorted set: triggers held until a due time (the score, Unix seconds)
    {prefix}:dead:{name}     stream: triggers handed out more than ``max_deliveries`` times

Life of a trigger: ``publish`` XADDs it (or ``publish_at`` ZADDs it, and a promoter moves it to the
stream once due); ``receive`` hands it to one consumer (XREADGROUP), where it sits in the group's
pending entries list (PEL) until ``ack`` (XACK + XDEL: the stream holds only what is not yet
acknowledged). A trigger whose consumer stays silent for the visibility timeout is handed to the
next receiver (XAUTOCLAIM) with its delivery count raised; past ``max_deliveries`` it goes to the
dead-letter stream instead. A consumer name's first receive in a process reads that name's own
pending entries back first: a worker restarted under its node name takes over at once what its
previous life was handed and never acknowledged, rather than leaving it to the timeout.

Every receive runs one Lua script — reclaim idle entries, promote due delayed triggers, read new
entries — so a busy queue costs one round trip per ``receive``; an idle one then blocks in
XREADGROUP for short slices. Scripts run atomically in Redis, which is what makes promotion safe
with any number of concurrent promoters: ZRANGEBYSCORE + XADD + ZREM happen as one step, so a
delayed trigger is moved exactly once and never lost between the set and the stream.

Two clocks, on purpose:

* **Due times** (``publish_at`` scores, promotion) use the injected :class:`~cronwheel.clock.Clock`:
  the caller decides "run at 12:00:05", the same clock the store and the scheduler use.
* **Visibility** uses Redis' own idle time (the PEL records when each entry was handed out, by
  the server's clock, and XAUTOCLAIM compares server-side). A visibility timeout is a *duration*,
  and measuring it with one clock — the server's — makes it immune to skew between worker
  nodes; doing it with node clocks would need a second per-delivery timestamp written on every
  receive and trusted across machines. The consequence: a manual clock cannot make a Redis
  entry idle; tests of visibility on Redis use a short real timeout.

The queue is never the record (the store-side sweep re-queues what it loses), so losing Redis'
data is survivable: a missing stream or group (``NOGROUP``) is recreated and the call retried;
connection failures surface as :class:`~cronwheel.errors.BackendUnavailableError`, which every
caller waits out. Refused credentials, and a connection set-up that Redis refuses (a database
index it does not have), surface as :class:`QueueRefusedError` (a ``PermanentError``): waiting
will not help, so the process stops and says so; so do TLS failures that waiting does not cure
(the server's certificate does not verify, the server refuses ours). A malformed URL is an
``InvalidInputError``; the URL forms, TLS and ACL credentials included, are in
:mod:`cronwheel.queue.redis_url`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as rx

from cronwheel.clock import Clock
from cronwheel.errors import BackendUnavailableError, InvalidInputError, PermanentError, causes
from cronwheel.queue.port import Delivery, QueueStats, Trigger
from cronwheel.queue.redis_url import check_queue_url
from cronwheel.telemetry import metrics
from cronwheel.tls import tls_refused

log = logging.getLogger("cronwheel.queue")

T = TypeVar("T")
P = ParamSpec("P")

# Move due delayed triggers (up to a batch) from the sorted set to the stream, atomically.
# KEYS: delayed, stream. ARGV: now (score), batch, queue name.
_PROMOTE_FN = """
local function promote(delayed, stream, now, batch, queue)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, batch)
  for _, member in ipairs(due) do
    local t = cjson.decode(member)
    redis.call('XADD', stream, '*', 'run_id', t[2], 'job_id', t[3], 'queue', queue)
  end
  if #due > 0 then
    redis.call('ZREM', delayed, unpack(due))
  end
  return #due
end
"""

# Append triggers to one queue's stream. KEYS: stream.
# ARGV: queue name, then run id, job id, slot (Unix microseconds; '' for none) per trigger.
PUBLISH_SCRIPT = """
for i = 2, #ARGV, 3 do
  if ARGV[i + 2] == '' then
    redis.call('XADD', KEYS[1], '*', 'run_id', ARGV[i], 'job_id', ARGV[i + 1], 'queue', ARGV[1])
  else
    redis.call('XADD', KEYS[1], '*', 'run_id', ARGV[i], 'job_id', ARGV[i + 1], 'queue', ARGV[1],
               'slot', ARGV[i + 2])
  end
end
return (#ARGV - 1) / 3
"""
PUBLISH_CHUNK = 1000  # triggers per script call: keeps each call's hold on Redis to a few ms

PROMOTE_SCRIPT = _PROMOTE_FN + "return promote(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), ARGV[3])\n"

# Hand out entries taken again (reclaimed, or read back from a consumer's own history): append
# {id, deliveries, fields} to ``out``, or move those handed out more than max_deliveries times to
# the dead-letter stream; entries deleted meanwhile (no fields) are only acknowledged.
# Returns how many were dead-lettered.
_HAND_OUT_FN = """
local function hand_out(entries, stream, dead, group, max_deliveries, dead_cap, out)
  local buried = 0
  for _, entry in ipairs(entries) do
    local id, fields = entry[1], entry[2]
    if not fields or #fields == 0 then
      redis.call('XACK', stream, group, id)
    else
      local times = redis.call('XPENDING', stream, group, id, id, 1)[1][4]
      if times > max_deliveries then
        table.insert(fields, 'deliveries')
        table.insert(fields, tostring(times - 1))
        table.insert(fields, 'entry_id')
        table.insert(fields, id)
        redis.call('XADD', dead, 'MAXLEN', '~', dead_cap, '*', unpack(fields))
        redis.call('XACK', stream, group, id)
        redis.call('XDEL', stream, id)
        buried = buried + 1
      else
        table.insert(out, {id, times, fields})
      end
    end
  end
  return buried
end
"""

# A restarted consumer takes back what its previous life was handed and never acknowledged
# (XREADGROUP from an id reads the consumer's own pending entries, raising their delivery
# counts), instead of leaving it to the visibility timeout. KEYS: stream, dead.
# ARGV: group, consumer, history cursor, limit, max deliveries, dead-letter stream cap.
# Returns {last id read or false, entries read, dead-lettered count, {{id, deliveries, fields}...}}.
HISTORY_SCRIPT = (
    _HAND_OUT_FN
    + """
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[4],
                        'STREAMS', KEYS[1], ARGV[3])
local entries = read and read[1][2] or {}
local out = {}
local buried = hand_out(entries, KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[5]), ARGV[6], out)
local last = #entries > 0 and entries[#entries][1] or false
return {last, #entries, buried, out}
"""
)

# One receive step. KEYS: stream, delayed, dead.
# ARGV: group, consumer, min idle ms, XAUTOCLAIM cursor, limit, max deliveries, now, promote batch,
#       queue name, dead-letter stream cap.
# Returns {next cursor, dead-lettered count, earliest delayed score or nil, {{id, deliveries, fields}...}}.
# XAUTOCLAIM comes first: with no group it fails (NOGROUP) before anything was written.
TAKE_SCRIPT = (
    _PROMOTE_FN
    + _HAND_OUT_FN
    + """
local stream, delayed, dead = KEYS[1], KEYS[2], KEYS[3]
local group, consumer = ARGV[1], ARGV[2]
local limit = tonumber(ARGV[5])
local max_deliveries = tonumber(ARGV[6])
local out = {}
local claimed = redis.call('XAUTOCLAIM', stream, group, consumer, ARGV[3], ARGV[4], 'COUNT', limit)
local buried = hand_out(claimed[2], stream, dead, group, max_deliveries, ARGV[10], out)
promote(delayed, stream, ARGV[7], tonumber(ARGV[8]), ARGV[9])
if #out < limit then
  local fresh = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', limit - #out,
                           'STREAMS', stream, '>')
  if fresh then
    for _, entry in ipairs(fresh[1][2]) do
      table.insert(out, {entry[1], 1, entry[2]})
    end
  end
end
local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
return {claimed[1], buried, first[2] or false, out}
"""
)


def _is_group_lost(error: rx.ResponseError) -> bool:
    """The stream or its group is gone (deleted, or Redis restarted without its data); a client
    blocked on it is woken with ``UNBLOCKED``."""
    text = str(error)
    return "NOGROUP" in text or text.startswith("UNBLOCKED")


_TLS_RESET_ATTEMPTS = 3


def _was_reset(error: BaseException) -> bool:
    return any(
        isinstance(cause, ConnectionResetError) or "Connection reset by peer" in str(cause)
        for cause in causes(error)
    )


class QueueRefusedError(PermanentError):
    """Redis refused the queue URL: its credentials, or its connection set-up."""


def _refusal(error: Exception) -> QueueRefusedError:
    return QueueRefusedError(
        f"the queue (Redis) refused the connection: {error} (check CRONWHEEL_QUEUE_URL / --queue-url)"
    )


@contextmanager
def _translated() -> Iterator[None]:
    """The one place where redis-py errors become cronwheel errors."""
    try:
        yield
    except (rx.AuthenticationError, rx.AuthorizationError, rx.AuthenticationWrongNumberOfArgsError) as error:
        raise _refusal(error) from error
    except (rx.ConnectionError, rx.TimeoutError, rx.ReadOnlyError, OSError) as error:
        # ConnectionError covers refused connections, resets, LOADING and authentication failures;
        # ReadOnlyError is a failover in progress (we are talking to a replica).
        if tls_refused(error):
            raise _refusal(error) from error
        raise BackendUnavailableError(f"the queue (Redis) is unavailable: {error}") from error


def _fields(raw: Any) -> dict[str, str]:
    """Stream entry fields: a flat [k, v, ...] list from Lua, a dict from redis-py."""
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    items = list(raw or [])
    return {str(items[i]): str(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def _micros(instant: datetime) -> int:
    return (instant - _EPOCH) // _MICROSECOND


def _instant(micros: str) -> datetime:
    return _EPOCH + int(micros) * _MICROSECOND


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _entry_ms(entry_id: str) -> int:
    return int(entry_id.split("-", 1)[0])


class RedisStreamQueue:
    """The :class:`~cronwheel.queue.port.Queue` on Redis Streams (see the module docstring)."""

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        prefix: str = "cronwheel",
        visibility_timeout_s: float = 300.0,
        group: str = "workers",
        max_deliveries: int = 10,
        poll_s: float = 1.0,
        promote_batch: int = 1000,
        publish_batch: int = 50_000,
        dead_letter_max: int = 100_000,
        connect_timeout_s: float = 5.0,
        socket_timeout_s: float = 15.0,
    ) -> None:
        """Open lazily (no I/O here; ``ping`` checks the connection).

        * ``visibility_timeout_s``: how long a handed-out trigger may stay unacknowledged before
          another receiver gets it (measured by Redis; see the module docstring).
        * ``max_deliveries``: a trigger is handed out at most this many times; the next reclaim
          moves it to the dead-letter stream (capped near ``dead_letter_max`` entries) instead.
          The store still holds the run, so the sweep may queue it again later.
        * ``poll_s``: the longest single blocking read. A waiting receiver wakes at once for new
          entries, and at least every ``min(poll_s, visibility_timeout_s)`` (or when the next
          delayed trigger is due) to reclaim and promote. Must stay below ``socket_timeout_s``.
        * ``promote_batch``: delayed triggers moved per script call; ``publish_batch``: triggers
          sent per round trip.
        """
        if visibility_timeout_s <= 0 or max_deliveries < 1 or not 0 < poll_s < socket_timeout_s:
            raise InvalidInputError(
                "the Redis queue needs visibility_timeout_s > 0, max_deliveries >= 1 and "
                "0 < poll_s < socket_timeout_s"
            )
        self._clock = clock
        self._prefix = prefix
        self._group = group
        self._visibility = visibility_timeout_s
        self._max_deliveries = max_deliveries
        self._poll = poll_s
        self._promote_batch = promote_batch
        self._publish_batch = publish_batch
        self._dead_letter_max = dead_letter_max
        check_queue_url(url)  # the scheme, the TLS options and their files, before any I/O
        self._tls = url.startswith("rediss:")
        try:
            self._redis: aioredis.Redis = aioredis.Redis.from_url(
                url,
                decode_responses=True,
                socket_connect_timeout=connect_timeout_s,
                socket_timeout=socket_timeout_s,
            )
        except ValueError as error:  # redis-py's URL parsing: a port or database that is no number
            raise InvalidInputError(f"the queue URL is not a Redis URL: {error}") from None
        self._take = self._redis.register_script(TAKE_SCRIPT)
        self._history_script = self._redis.register_script(HISTORY_SCRIPT)
        self._promote = self._redis.register_script(PROMOTE_SCRIPT)
        self._publish = self._redis.register_script(PUBLISH_SCRIPT)
        self._groups: set[str] = set()  # queue names whose group this instance has made sure of
        self._cursors: dict[str, str] = {}  # queue name -> XAUTOCLAIM cursor
        # (queue, consumer) -> how far its own history has been read back; None: all of it
        self._history: dict[tuple[str, str], str | None] = {}

    # -- keys -----------------------------------------------------------------------------------

    def stream_key(self, queue: str) -> str:
        return f"{self._prefix}:q:{queue}"

    def delayed_key(self, queue: str) -> str:
        return f"{self._prefix}:delayed:{queue}"

    def dead_key(self, queue: str) -> str:
        return f"{self._prefix}:dead:{queue}"

    # -- the group ------------------------------------------------------------------------------

    async def _ensure_group(self, queue: str) -> None:
        if queue in self._groups:
            return
        try:
            # From id 0, not $: after a data loss, publishers may have re-created the stream
            # before any receiver re-created the group, and those entries must be delivered.
            await self._redis.xgroup_create(self.stream_key(queue), self._group, id="0", mkstream=True)
        except rx.ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
        self._groups.add(queue)

    async def _in_group(
        self, queue: str, op: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``op`` with the group in place; if the stream or group vanished, recreate it and
        run ``op`` once more."""
        await self._ensure_group(queue)
        try:
            return await op(*args, **kwargs)
        except rx.ResponseError as error:
            if not _is_group_lost(error):
                raise
        log.warning(
            "queue stream or consumer group missing; recreating it",
            extra={"action": "recreate_group", "queue": queue},
        )
        self._groups.discard(queue)
        self._cursors.pop(queue, None)
        await self._ensure_group(queue)
        return await op(*args, **kwargs)

    # -- the Queue protocol ---------------------------------------------------------------------

    async def ping(self) -> None:
        """Connect (if need be) and ping: what a process waits for at start. A database index
        Redis does not have is refused; any other error answer (``BUSY``, ``MASTERDOWN`` on a
        replica ...) is a server not ready yet, waited out."""
        with _translated():
            try:
                await self._ping_past_resets()
            except rx.ResponseError as error:
                if "DB index" in str(error):
                    raise _refusal(error) from error
                raise BackendUnavailableError(f"the queue (Redis) is not ready: {error}") from error

    async def _ping_past_resets(self) -> None:
        """Ping, asking again at once when a TLS connection was reset: a TLS 1.3 server refuses
        a client certificate after the client's handshake ended, and when the client's first
        command crosses the refusal the connection is reset before its alert is read. Another
        connection reads the alert (a refusal) or gets through."""
        for attempt in range(1, _TLS_RESET_ATTEMPTS + 1):
            try:
                await self._redis.ping()
                return
            except rx.ConnectionError as error:
                if not (self._tls and attempt < _TLS_RESET_ATTEMPTS and _was_reset(error)):
                    raise

    async def publish(self, triggers: Sequence[Trigger]) -> None:
        """Append the triggers to their streams, in order per queue: one script call per
        ``PUBLISH_CHUNK`` triggers of a queue, pipelined, so a batch costs one round trip per
        ``publish_batch`` triggers (the calls go by EVALSHA; the script is loaded only when
        Redis says it does not know it, after a restart). A script rather than pipelined XADDs:
        about five times faster for big batches, because the client builds one command per
        chunk instead of one per trigger."""
        with _translated():
            for start in range(0, len(triggers), self._publish_batch):
                by_queue: dict[str, list[str]] = {}
                for trigger in triggers[start : start + self._publish_batch]:
                    slot = "" if trigger.slot is None else str(_micros(trigger.slot))
                    by_queue.setdefault(trigger.queue, []).extend((trigger.run_id, trigger.job_id, slot))
                try:
                    await self._publish_calls(by_queue)
                except rx.NoScriptError:  # Redis restarted (or its scripts were flushed)
                    await self._redis.script_load(PUBLISH_SCRIPT)
                    await self._publish_calls(by_queue)  # every call failed alike: none ran

    async def _publish_calls(self, by_queue: dict[str, list[str]]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for name, ids in by_queue.items():
            for chunk in range(0, len(ids), 3 * PUBLISH_CHUNK):
                args = [name, *ids[chunk : chunk + 3 * PUBLISH_CHUNK]]
                pipe.evalsha(self._publish.sha, 1, self.stream_key(name), *args)
        await pipe.execute()

    async def publish_at(self, trigger: Trigger, at: datetime) -> None:
        # A nonce keeps two holds of the same trigger apart, like the in-process queue does.
        member = json.dumps([uuid.uuid4().hex[:12], trigger.run_id, trigger.job_id], separators=(",", ":"))
        with _translated():
            await self._redis.zadd(self.delayed_key(trigger.queue), {member: at.timestamp()})

    async def promote_due(self, queue: str) -> int:
        """Move every delayed trigger of ``queue`` that is due (by the injected clock) to its
        stream; returns how many moved. ``receive`` does this too; safe to run concurrently."""
        moved = 0
        with _translated():
            while True:
                now = self._clock.now().timestamp()
                keys = [self.delayed_key(queue), self.stream_key(queue)]
                count = int(await self._promote(keys=keys, args=[repr(now), self._promote_batch, queue]))
                moved += count
                if count < self._promote_batch:
                    return moved

    async def receive(self, queue: str, consumer: str, limit: int, timeout_s: float) -> list[Delivery]:
        if limit <= 0:
            return []
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout_s
        with _translated():
            if self._history.get((queue, consumer), "0") is not None:
                recovered = await self._in_group(queue, self._take_history, queue, consumer, limit)
                if recovered:
                    return recovered
            while True:
                deliveries, next_due_in = await self._in_group(queue, self._take_once, queue, consumer, limit)
                if deliveries:
                    return deliveries
                remaining = give_up - loop.time()
                if remaining <= 0:
                    return []
                wait = min(remaining, self._poll, self._visibility, next_due_in)
                if wait < 0.001:  # more delayed triggers are due than one promotion moves
                    continue
                deliveries = await self._in_group(queue, self._read_blocking, queue, consumer, limit, wait)
                if deliveries:
                    return deliveries

    async def _take_once(self, queue: str, consumer: str, limit: int) -> tuple[list[Delivery], float]:
        """Reclaim, promote, read new: one script, one round trip. Returns the deliveries and
        how long (seconds, by the injected clock) until the next delayed trigger is due."""
        now = self._clock.now().timestamp()
        cursor, buried, first_due, entries = await self._take(
            keys=[self.stream_key(queue), self.delayed_key(queue), self.dead_key(queue)],
            args=[
                self._group,
                consumer,
                max(1, int(self._visibility * 1000)),
                self._cursors.get(queue, "0-0"),
                limit,
                self._max_deliveries,
                repr(now),
                self._promote_batch,
                queue,
                self._dead_letter_max,
            ],
        )
        self._cursors[queue] = str(cursor)
        if buried:
            metrics.DEAD_LETTERED.labels(queue).inc(int(buried))
            log.warning(
                "triggers dead-lettered",
                extra={
                    "action": "dead_letter",
                    "queue": queue,
                    "count": int(buried),
                    "max_deliveries": self._max_deliveries,
                },
            )
        deliveries = [self._delivery(queue, str(i), int(n), f) for i, n, f in entries]
        next_due_in = math.inf if first_due is None else float(first_due) - now
        return deliveries, next_due_in

    async def _take_history(self, queue: str, consumer: str, limit: int) -> list[Delivery]:
        """The first receives of a consumer name in this process: what that name was handed
        before (by a previous process, which died or stopped without acknowledging) comes back
        at once rather than after the visibility timeout. Consumer names must be unique among
        live processes (node names are)."""
        key = (queue, consumer)
        last, read, buried, entries = await self._history_script(
            keys=[self.stream_key(queue), self.dead_key(queue)],
            args=[
                self._group,
                consumer,
                self._history.get(key) or "0",
                limit,
                self._max_deliveries,
                self._dead_letter_max,
            ],
        )
        self._history[key] = str(last) if int(read) >= limit else None
        if buried:
            metrics.DEAD_LETTERED.labels(queue).inc(int(buried))
        deliveries = [self._delivery(queue, str(i), int(n), f) for i, n, f in entries]
        if deliveries or buried:
            log.info(
                "took back unacknowledged triggers",
                extra={
                    "action": "recover",
                    "queue": queue,
                    "node": consumer,
                    "count": len(deliveries),
                    "dead_lettered": int(buried),
                },
            )
        return deliveries

    async def _read_blocking(self, queue: str, consumer: str, limit: int, wait_s: float) -> list[Delivery]:
        stream = self.stream_key(queue)
        reply: Any = await self._redis.xreadgroup(
            self._group, consumer, {stream: ">"}, count=limit, block=max(1, int(wait_s * 1000))
        )
        return [
            self._delivery(queue, str(entry_id), 1, fields)
            for _, entries in reply or []
            for entry_id, fields in entries
        ]

    def _delivery(self, queue: str, entry_id: str, times: int, raw: Any) -> Delivery:
        fields = _fields(raw)
        slot = None if "slot" not in fields else _instant(fields["slot"])
        trigger = Trigger(fields.get("run_id", ""), fields.get("job_id", ""), queue, slot)
        return Delivery(trigger, entry_id, times)

    async def ack(self, queue: str, deliveries: Sequence[Delivery]) -> None:
        """XACK and XDEL in one transaction: acknowledged triggers leave the stream, so the
        stream holds exactly what is undelivered or pending. The token is the entry id, so a late
        ack from a consumer whose trigger was meanwhile reclaimed by another also removes it:
        harmless, since the claim in the store, not the queue, decides who attempts a run."""
        ids = [delivery.token for delivery in deliveries]
        if not ids:
            return
        stream = self.stream_key(queue)
        with _translated():
            pipe = self._redis.pipeline(transaction=True)
            pipe.xack(stream, self._group, *ids)
            pipe.xdel(stream, *ids)
            for result in await pipe.execute(raise_on_error=False):
                # No group (the data was lost): nothing is pending, and XDEL ran anyway.
                if isinstance(result, rx.ResponseError) and not _is_group_lost(result):
                    raise result

    async def depth(self, queue: str) -> int:
        """Undelivered + pending (handed out, not acknowledged) + delayed triggers."""
        with _translated():
            pipe = self._redis.pipeline(transaction=False)
            pipe.xlen(self.stream_key(queue))
            pipe.zcard(self.delayed_key(queue))
            in_stream, delayed = await pipe.execute()
        return int(in_stream) + int(delayed)

    async def lag(self, queue: str) -> float:
        """Age in seconds of the oldest trigger that is due and not acknowledged: the oldest
        stream entry (undelivered or pending; by Redis' clock, which stamped its id) or the most
        overdue delayed trigger not yet promoted (by the injected clock). 0 when there is none."""
        with _translated():
            pipe = self._redis.pipeline(transaction=False)
            pipe.time()
            pipe.xrange(self.stream_key(queue), count=1)
            pipe.zrange(self.delayed_key(queue), 0, 0, withscores=True)
            results: list[Any] = await pipe.execute()
        (seconds, micros), oldest, first_delayed = results
        age = 0.0
        if oldest:
            server_ms = int(seconds) * 1000 + int(micros) // 1000
            age = (server_ms - _entry_ms(str(oldest[0][0]))) / 1000
        if first_delayed:
            age = max(age, self._clock.now().timestamp() - float(first_delayed[0][1]))
        return max(0.0, age)

    async def stats(self, queue: str) -> QueueStats:
        """One pipelined round trip: the stream's length, the group's pending count (XPENDING's
        summary), the delayed set's size and what :meth:`lag` reads. Delayed triggers already
        due but not yet promoted count as delayed (a receive promotes them)."""
        with _translated():
            pipe = self._redis.pipeline(transaction=False)
            pipe.xlen(self.stream_key(queue))
            pipe.xpending(self.stream_key(queue), self._group)
            pipe.zcard(self.delayed_key(queue))
            in_stream, pending, delayed = await pipe.execute(raise_on_error=False)
        if isinstance(pending, rx.ResponseError):
            if not _is_group_lost(pending):
                raise pending
            pending = {"pending": 0}  # no group yet: nothing was handed out
        for result in (in_stream, delayed):
            if isinstance(result, Exception):
                raise result
        handed_out = int(pending["pending"])
        lag = await self.lag(queue)
        return QueueStats(max(0, int(in_stream) - handed_out), handed_out, int(delayed), lag)

    async def close(self) -> None:
        with _translated():
            await self._redis.aclose()
