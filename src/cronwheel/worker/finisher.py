"""Recording attempt outcomes many per store transaction (group commit).

A worker finishing hundreds of attempts a second would spend most of its time on one write
transaction per outcome. :class:`Finisher` waits ``gather_s`` (a few milliseconds; none once
``most`` outcomes wait) after an outcome comes for others to come too, and writes them together;
the outcomes that arrive while that write is in flight go together in the next one, and so on.
Under light load an outcome is written alone, ``gather_s`` after it comes; under heavy load the
batches grow with the load. With ``gather_s`` 0 nothing waits: the first outcome is written at
once.

Each caller gets its own run back (or None when the worker's lease was lost), and a write that
fails fails every caller of that batch with the same error, as a write of its own would have.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from cronwheel.clock import Clock
from cronwheel.model import Finish, Run
from cronwheel.store.port import LeaseStore
from cronwheel.worker.gate import Gate


class Finisher:
    def __init__(
        self, store: LeaseStore, clock: Clock, node: str, *, gather_s: float = 0.0, most: int = 64
    ) -> None:
        self.store = store
        self.clock = clock
        self.node = node
        self.gather_s = gather_s  # how long an outcome waits for others before it is written
        self.most = most  # outcomes that are written without waiting for more
        self._enough = Gate()  # opened when ``most`` outcomes wait
        self._waiting: list[tuple[Finish, asyncio.Future[Run | None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def record(self, finish: Finish) -> Run | None:
        """Record one attempt's outcome (see :meth:`Store.finish_attempts`); returns the run as
        recorded, or None if this worker no longer holds its lease."""
        future: asyncio.Future[Run | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((finish, future))
        if len(self._waiting) >= self.most:
            self._enough.open()
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_all(), name=f"finisher-{self.node}")
        return await future

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                if self.gather_s > 0 and len(self._waiting) < self.most:
                    await self._enough.wait(self.gather_s)
                batch, self._waiting = self._waiting, []
                await self._write(batch, self.clock.now())
        finally:
            self._writer = None

    async def _write(self, batch: list[tuple[Finish, asyncio.Future[Run | None]]], now: datetime) -> None:
        try:
            recorded = await self.store.finish_attempts([finish for finish, _ in batch], self.node, now)
        except Exception as error:  # each caller sees the error its own write would have raised
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for finish, future in batch:
            if not future.done():
                future.set_result(recorded.get(finish.run_id))
