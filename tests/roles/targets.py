"""Python targets for the role tests: they record every call in a module-level list.

The payload steers them: ``{"hang": n, "hang_s": s}`` makes attempts 1..n sleep ``s`` seconds
(until cancelled), then ``{"fail": n}`` makes attempts 1..n raise. A test may also
put sleep durations in :data:`hangs`: each call takes the first one left, whatever its payload.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronwheel.worker.executors import AttemptContext


@dataclass(frozen=True, slots=True)
class Call:
    execution_id: str
    attempt: int
    scheduled_at: datetime
    payload: Any


calls: list[Call] = []
cancelled: list[str] = []  # execution ids whose attempt was cancelled while hanging
hangs: list[float] = []  # seconds the next calls sleep, one entry per call
said: list[str] = []  # what ``speak`` has written so far (a test appends to it)


async def record(payload: Any, ctx: AttemptContext) -> str:
    calls.append(Call(ctx.execution_id, ctx.attempt, ctx.scheduled_at, payload))
    spec: dict[str, Any] = payload if isinstance(payload, dict) else {}
    hang = float(spec.get("hang_s", 5.0)) if ctx.attempt <= int(spec.get("hang", 0)) else 0.0
    if hangs:
        hang = hangs.pop(0)
    if hang:
        try:
            await asyncio.sleep(hang)
        except asyncio.CancelledError:
            cancelled.append(ctx.execution_id)
            raise
    if ctx.attempt <= int(spec.get("fail", 0)):
        raise RuntimeError(f"planned failure of attempt {ctx.attempt}")
    return f"done {ctx.execution_id} #{ctx.attempt}"


def calls_of(execution_id: str) -> list[Call]:
    return [call for call in calls if call.execution_id == execution_id]


def reset() -> None:
    calls.clear()
    cancelled.clear()
    hangs.clear()
    said.clear()


async def speak(payload: Any, ctx: AttemptContext) -> str:
    """Shows :data:`said` as its output so far until a line ``end`` is in it, then returns it."""
    calls.append(Call(ctx.execution_id, ctx.attempt, ctx.scheduled_at, payload))
    if ctx.live is not None:
        ctx.live.attach(lambda: "".join(said))
    while "end\n" not in said:
        await asyncio.sleep(0.005)
    return "".join(said)
