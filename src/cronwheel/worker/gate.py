"""Waiting a little for company: a batch that can grow is held until it is big enough or a few
milliseconds have passed, whichever comes first (group commit with a bound on the wait)."""

from __future__ import annotations

import asyncio


class Gate:
    """:meth:`wait` returns after ``within_s`` seconds (of the event loop), or at once when
    :meth:`open` is called meanwhile; one timer per wait, nothing while no one waits."""

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    async def wait(self, within_s: float) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(within_s, _settle, waiter)
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiters.remove(waiter)

    def open(self) -> None:
        """Let every current waiter go on."""
        for waiter in self._waiters:
            _settle(waiter)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
