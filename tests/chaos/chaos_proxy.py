"""A TCP fault proxy for the chaos suite: asyncio streams, no third-party proxy.

A :class:`Proxy` listens on 127.0.0.1 (a free port) and forwards every accepted connection to one
upstream, in 64 KiB chunks with backpressure (``drain()``) in both directions. Its mode applies to
every connection, open or new, from the moment it is set:

* **pass** (the default, :meth:`Proxy.apply` with ``Mode()``): bytes flow unchanged.
* **delay**: each chunk, in either direction, is forwarded ``delay_s`` (+ up to ``jitter_s``) after
  it was read. Each direction keeps a queue of (due time, chunk), so latency is added once per
  chunk, not once per chunk *in series*: throughput is not capped by the delay (up to
  ``QUEUE_LIMIT`` bytes may be in flight per direction). Byte order per direction is kept (a due
  time is never earlier than the one before it, jitter included). Chunks still queued when the
  mode changes keep their due times; later chunks queue behind them.
* **blackhole**: a partition that drops packets. Open connections stay open (no FIN, no RST);
  every byte read from either side, and every delayed chunk that falls due, is dropped. New
  connections are accepted (the kernel would complete the handshake anyway) and held: their
  bytes are read and dropped, no upstream connection is made. **On heal** (any mode other than
  blackhole): a connection that lost bytes has a hole in its byte stream that no real TCP would
  have, so it is reset (RST) and its client reconnects, as after a partition longer than its
  timeouts; a connection that lost nothing (idle during the partition) carries on unharmed, and a
  held one that lost nothing connects upstream then.
* **cut**: every open connection is reset on both sides (``SO_LINGER`` 0, then close: RST), and
  every new connection is accepted and reset at once, until the mode changes.

When one side closes (EOF), the other direction's queued chunks are flushed and both sides are
closed (no half-close). When one side resets or fails, the other is reset too.

Everything here runs on one event loop (the backplane's); other threads use
:class:`chaos_backplane.ProxyHandle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import random
import socket
import struct
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

HOST = "127.0.0.1"
CHUNK = 64 * 1024
QUEUE_LIMIT = 8 * 1024 * 1024  # bytes queued (in flight) per direction under delay
BACKLOG = 1024
_LINGER_RST = struct.pack("ii", 1, 0)


class ModeKind(enum.Enum):
    PASS = "pass"
    DELAY = "delay"
    BLACKHOLE = "blackhole"
    CUT = "cut"


@dataclass(frozen=True, slots=True)
class Mode:
    """What the proxy does to traffic: ``Mode()`` passes it through."""

    kind: ModeKind = ModeKind.PASS
    delay_s: float = 0.0
    jitter_s: float = 0.0

    def latency(self) -> float:
        """Seconds to hold a chunk read now (0 unless delaying)."""
        if self.kind is not ModeKind.DELAY:
            return 0.0
        return self.delay_s + (random.uniform(0.0, self.jitter_s) if self.jitter_s > 0 else 0.0)

    @property
    def drops(self) -> bool:
        return self.kind in (ModeKind.BLACKHOLE, ModeKind.CUT)


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """Counters since the proxy started. Bytes are those forwarded (``dropped``: discarded)."""

    accepted: int
    open: int
    bytes_up: int  # client -> upstream
    bytes_down: int  # upstream -> client
    dropped: int
    resets: int  # connections the proxy reset (cut, heal after loss, propagated resets)


def _abort(writer: asyncio.StreamWriter, *, rst: bool) -> None:
    """Close ``writer``'s socket at once; with ``rst`` the peer gets a RST, not a FIN."""
    if rst:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    writer.transport.abort()


class Proxy:
    """A listener on 127.0.0.1 forwarding to ``upstream_host:upstream_port`` in its current mode.

    Use it only from its event loop: :meth:`start`, :meth:`apply`, :meth:`close`, :meth:`stats`.
    """

    def __init__(self, name: str, upstream_host: str, upstream_port: int) -> None:
        self.name = name
        self.upstream = (upstream_host, upstream_port)
        self.mode = Mode()
        self.port = 0
        self.counters = {"accepted": 0, "bytes_up": 0, "bytes_down": 0, "dropped": 0, "resets": 0}
        self._connections: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self._unblocked = asyncio.Event()
        self._unblocked.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, HOST, 0, backlog=BACKLOG, limit=2 * CHUNK)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and close every connection (without RST)."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.abort(rst=False)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self._server.wait_closed()

    async def apply(self, mode: Mode) -> None:
        """Switch to ``mode``; returns once open connections have been treated accordingly."""
        previous, self.mode = self.mode, mode
        if mode.kind is ModeKind.BLACKHOLE:
            self._unblocked.clear()
        elif previous.kind is ModeKind.BLACKHOLE:
            for connection in list(self._connections):
                if connection.tainted:
                    connection.abort(rst=True)
            self._unblocked.set()
        if mode.kind is ModeKind.CUT:
            for connection in list(self._connections):
                connection.abort(rst=True)
        for _ in range(2):  # let the aborted sockets close (their close is scheduled with call_soon)
            await asyncio.sleep(0)

    def stats(self) -> ProxyStats:
        return ProxyStats(open=len(self._connections), **self.counters)

    async def wait_unblocked(self) -> None:
        await self._unblocked.wait()

    def forget(self, connection: _Connection) -> None:
        self._connections.discard(connection)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counters["accepted"] += 1
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        await connection.run()


class _Connection:
    """One accepted client connection and its upstream twin; ends closed or reset on both sides."""

    def __init__(self, proxy: Proxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.reader = reader
        self.writer = writer
        self.upstream: asyncio.StreamWriter | None = None
        self.tainted = False  # lost bytes to a blackhole
        self.closed = False
        self._main: asyncio.Task[Any] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        self._main = asyncio.current_task()
        try:
            await self._serve()
        except OSError:
            self.abort(rst=True)
        except asyncio.CancelledError:
            self.abort(rst=False)  # already aborted, unless the loop itself is shutting down
        finally:
            for task in list(self._tasks):
                task.cancel()
            self.proxy.forget(self)

    async def _serve(self) -> None:
        if self.proxy.mode.kind is ModeKind.CUT:
            self.abort(rst=True)
            return
        if self.proxy.mode.kind is ModeKind.BLACKHOLE and not await self._hold():
            return
        up_reader, self.upstream = await asyncio.open_connection(*self.proxy.upstream, limit=2 * CHUNK)
        pumps = {
            self.spawn(_Direction(self, self.reader, self.upstream, "bytes_up").pump()),
            self.spawn(_Direction(self, up_reader, self.writer, "bytes_down").pump()),
        }
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        self.close()

    async def _hold(self) -> bool:
        """Read and drop the client's bytes until heal; whether to connect upstream then."""
        discard = self.spawn(self._discard())
        healed = self.spawn(self.proxy.wait_unblocked())
        await asyncio.wait({discard, healed}, return_when=asyncio.FIRST_COMPLETED)
        discard.cancel()
        healed.cancel()
        if not healed.done() or healed.cancelled():  # the client left first
            self.close()
            return False
        return not self.closed

    async def _discard(self) -> None:
        while chunk := await self.reader.read(CHUNK):
            self.drop(len(chunk))

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.abort(rst=True)  # one side failed or reset: reset the other

    def drop(self, size: int) -> None:
        self.tainted = True
        self.proxy.counters["dropped"] += size

    def close(self) -> None:
        """Graceful: flush what each side's transport holds, then FIN both."""
        if self.closed:
            return
        self.closed = True
        for writer in (self.writer, self.upstream):
            if writer is not None:
                writer.close()
        self._stop_tasks()

    def abort(self, *, rst: bool) -> None:
        """Close both sides at once; with ``rst`` both peers get a RST."""
        if self.closed:
            return
        self.closed = True
        if rst:
            self.proxy.counters["resets"] += 1
        for writer in (self.writer, self.upstream):
            if writer is not None:
                _abort(writer, rst=rst)
        self._stop_tasks()

    def _stop_tasks(self) -> None:
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        if self._main is not None and self._main is not current:
            self._main.cancel()


class _Direction:
    """One direction of a connection: chunks read from ``source`` are written to ``sink`` in
    order, each once the latency of the mode at the time it was read has passed."""

    def __init__(
        self,
        connection: _Connection,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        counter: str,
    ) -> None:
        self._connection = connection
        self._proxy = connection.proxy
        self._source = source
        self._sink = sink
        self._counter = counter
        self._queue: deque[tuple[float, bytes | None]] = deque()  # (due, chunk); None: EOF
        self._queued = 0
        self._last_due = 0.0
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    async def pump(self) -> None:
        """Read until EOF, forwarding or queueing each chunk; returns once everything is written."""
        loop = asyncio.get_running_loop()
        while chunk := await self._source.read(CHUNK):
            mode = self._proxy.mode
            if mode.drops:
                self._connection.drop(len(chunk))
                continue
            latency = mode.latency()
            if latency <= 0 and not self._queue:
                await self._forward(chunk)
            else:
                await self._enqueue(loop.time() + latency, chunk)
        if self._sender is not None and self._queue:
            self._queue.append((self._last_due, None))
            self._wake.set()
            await self._sender

    async def _forward(self, chunk: bytes) -> None:
        self._sink.write(chunk)
        self._proxy.counters[self._counter] += len(chunk)
        await self._sink.drain()

    async def _enqueue(self, due: float, chunk: bytes) -> None:
        self._last_due = max(due, self._last_due)
        self._queue.append((self._last_due, chunk))
        self._queued += len(chunk)
        self._wake.set()
        if self._sender is None:
            self._sender = self._connection.spawn(self._send())
        while self._queued > QUEUE_LIMIT:
            self._room.clear()
            await self._room.wait()

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            due, chunk = self._queue[0]
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            self._queue.popleft()
            if chunk is None:
                return
            self._queued -= len(chunk)
            self._room.set()
            if self._proxy.mode.drops:
                self._connection.drop(len(chunk))
            else:
                await self._forward(chunk)
