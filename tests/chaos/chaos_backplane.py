"""The chaos suite's backplane: one daemon thread with its own event loop hosting the fault proxies
and the witness sink, so that whatever the test thread blocks on (subprocess waits, ``time.sleep``,
its own event loop) never delays a byte they forward or a request they answer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from chaos_proxy import HOST, Mode, ModeKind, Proxy, ProxyStats
from chaos_witness import Witness

T = TypeVar("T")


async def _await(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


class Backplane:
    """Owns the loop thread; every method is synchronous and safe to call from any other thread.

    ``start()`` before use, ``stop()`` after (or ``with Backplane() as backplane:``). ``stop()``
    closes every proxy and the witness, then ends the thread.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._proxies: dict[str, ProxyHandle] = {}
        self._witness: Witness | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the backplane is already started")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(ready,), name="chaos-backplane", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the backplane's event loop did not start")

    def _main(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def stop(self) -> None:
        """Close every proxy and the witness, then stop the loop and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        try:
            self.run(self._close_all(), timeout=15)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(15)
            self._loop = self._thread = None
            with self._lock:
                self._proxies.clear()
                self._witness = None

    async def _close_all(self) -> None:
        for handle in list(self._proxies.values()):
            await handle.proxy.close()
        if self._witness is not None:
            await self._witness.close()

    def run(self, work: Coroutine[Any, Any, T] | Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
        """Run a coroutine (or a coroutine function of no arguments) on the backplane's loop and
        return its result; raises ``TimeoutError`` (after cancelling it) past ``timeout``."""
        coroutine = work if isinstance(work, Coroutine) else _await(work)
        loop = self._loop
        if loop is None:
            coroutine.close()
            raise RuntimeError("the backplane is not running")
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("Backplane.run() called from the backplane's own thread would deadlock")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"backplane work did not finish within {timeout:g} s") from None

    def proxy(self, name: str, upstream_host: str, upstream_port: int) -> ProxyHandle:
        """A started proxy on 127.0.0.1:<free port> forwarding to the upstream; names are unique."""
        with self._lock:
            if name in self._proxies:
                raise ValueError(f"a proxy named {name!r} exists already")
            proxy = self.run(self._start_proxy(name, upstream_host, upstream_port))
            handle = ProxyHandle(self, proxy)
            self._proxies[name] = handle
            return handle

    @staticmethod
    async def _start_proxy(name: str, upstream_host: str, upstream_port: int) -> Proxy:
        proxy = Proxy(name, upstream_host, upstream_port)
        await proxy.start()
        return proxy

    def forget(self, handle: ProxyHandle) -> None:
        with self._lock:
            if self._proxies.get(handle.name) is handle:
                del self._proxies[handle.name]

    def proxies(self) -> list[ProxyHandle]:
        with self._lock:
            return list(self._proxies.values())

    def heal_all(self) -> None:
        """Every proxy back to pass-through."""
        for handle in self.proxies():
            handle.heal()

    def witness(self) -> Witness:
        """The witness sink, started on first use."""
        with self._lock:
            if self._witness is None:
                witness = Witness()
                self.run(witness.start())
                self._witness = witness
            return self._witness


class ProxyHandle:
    """A thread-safe remote control for one :class:`Proxy`: each mode method returns once the
    proxy applies the mode (open connections already reset, for ``cut``)."""

    def __init__(self, backplane: Backplane, proxy: Proxy) -> None:
        self._backplane = backplane
        self.proxy = proxy  # for the backplane's loop only
        self.name = proxy.name
        self.host = HOST
        self.port = proxy.port

    def __repr__(self) -> str:
        return f"ProxyHandle({self.name!r}, {self.host}:{self.port} -> {self.proxy.upstream})"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def mode(self) -> Mode:
        return self.proxy.mode  # one attribute read: atomic

    def heal(self) -> None:
        """Pass-through. Coming out of a blackhole, connections that lost bytes are reset."""
        self._apply(Mode())

    def delay(self, ms: float, jitter_ms: float = 0.0) -> None:
        """Every chunk, both directions, forwarded ``ms`` (+ uniform 0..``jitter_ms``) after it arrived."""
        if ms < 0 or jitter_ms < 0:
            raise ValueError("delay and jitter must not be negative")
        self._apply(Mode(ModeKind.DELAY, ms / 1000.0, jitter_ms / 1000.0))

    def blackhole(self) -> None:
        """Drop every byte both ways; connections, old and new, stay open and silent."""
        self._apply(Mode(ModeKind.BLACKHOLE))

    def cut(self) -> None:
        """Reset every open connection, and each new one at once, until the next mode."""
        self._apply(Mode(ModeKind.CUT))

    def stats(self) -> ProxyStats:
        return self._backplane.run(self._stats())

    async def _stats(self) -> ProxyStats:
        return self.proxy.stats()

    def close(self) -> None:
        """Stop listening and close its connections; the backplane forgets it (its name is free)."""
        self._backplane.forget(self)
        self._backplane.run(self.proxy.close())

    def _apply(self, mode: Mode) -> None:
        self._backplane.run(self.proxy.apply(mode))
