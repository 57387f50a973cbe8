"""Every loop waits out a transient failure as the one retry policy says (growing waits, reset by
a success) and stops at a permanent one. Failures are injected into the real
roles; the policy is shrunk so that the waits are milliseconds."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

import pytest

from cronwheel.clock import AnchoredClock
from cronwheel.errors import BackendUnavailableError, PermanentError
from cronwheel.node.timekeeping import keep_anchored
from cronwheel.queue import Delivery, Trigger
from cronwheel.retrying import Backoff

from .harness import Roles

FAST = Backoff(first_s=0.01, multiplier=2.0, cap_s=0.04, jitter=0.0)
DOWN = BackendUnavailableError("down")


def waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    return [record.__dict__["retry_in_s"] for record in caplog.records if hasattr(record, "retry_in_s")]


class Script:
    """Answers one call per step: an exception to raise, or a value to return; then ``stop``."""

    def __init__(self, stop: asyncio.Event, *steps: Any) -> None:
        self.steps = list(steps)
        self.stop = stop

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(self.steps) == 1:
            self.stop.set()
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


async def test_the_scheduler_backs_off_while_a_backend_is_down(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop = asyncio.Event()
    now: datetime = roles.now
    monkeypatch.setattr(roles.scheduler, "backoff", FAST)
    monkeypatch.setattr(roles.scheduler, "tick", Script(stop, DOWN, DOWN, DOWN, DOWN, now, DOWN, now))
    with caplog.at_level(logging.WARNING, logger="cronwheel.scheduler"):
        await asyncio.wait_for(roles.scheduler.run(roles.changes, stop), 10)
    assert waits(caplog) == [0.01, 0.02, 0.04, 0.04, 0.01]  # capped, then reset by the success


async def test_a_permanent_error_stops_the_scheduler(roles: Roles, monkeypatch: pytest.MonkeyPatch) -> None:
    stop = asyncio.Event()
    monkeypatch.setattr(roles.scheduler, "tick", Script(stop, PermanentError("bad"), roles.now))
    with pytest.raises(PermanentError):
        await asyncio.wait_for(roles.scheduler.run(roles.changes, stop), 10)


async def test_the_sweeper_backs_off_while_a_backend_is_down(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop = asyncio.Event()
    monkeypatch.setattr(roles.sweeper, "backoff", FAST)
    monkeypatch.setattr(roles.sweeper, "every_s", 0.001)
    monkeypatch.setattr(roles.sweeper, "sweep", Script(stop, DOWN, DOWN, DOWN, 0, DOWN, 0))
    with caplog.at_level(logging.WARNING, logger="cronwheel.sweeper"):
        await asyncio.wait_for(roles.sweeper.run(stop), 10)
    assert waits(caplog) == [0.01, 0.02, 0.04, 0.01]


async def test_the_worker_backs_off_while_its_queue_is_down(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop = asyncio.Event()
    monkeypatch.setattr(roles.worker, "backoff", FAST)
    monkeypatch.setattr(roles.queue, "receive", Script(stop, DOWN, DOWN, DOWN, [], DOWN, []))
    with caplog.at_level(logging.WARNING, logger="cronwheel.worker"):
        await asyncio.wait_for(roles.worker.run(stop, drain_s=0), 10)
    assert waits(caplog) == [0.01, 0.02, 0.04, 0.01]


async def test_the_worker_pauses_receiving_while_its_claims_fail(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    worker = roles.new_worker("w2")
    monkeypatch.setattr(worker, "backoff", FAST)
    worker._claim_tries = FAST.tracker()
    monkeypatch.setattr(worker, "claim", Script(asyncio.Event(), DOWN, DOWN, DOWN, [], DOWN))
    delivery = Delivery(Trigger("run-1", "job-1"), "token")
    paused = []
    with caplog.at_level(logging.WARNING, logger="cronwheel.worker"):
        for _ in range(5):
            worker._busy += 1
            await worker._start_guarded([delivery])
            paused.append(worker._paused_until - worker._monotonic())
    assert waits(caplog) == [0.01, 0.02, 0.04, 0.01]
    assert 0.03 < paused[2] <= 0.04  # no receive meanwhile: the claims would fail alike
    assert worker._busy == 0


async def test_the_clock_is_anchored_again_with_backoff(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stop = asyncio.Event()
    sample = [(0.0, roles.now, 0.0)]
    monkeypatch.setattr(roles.store, "server_time", Script(stop, DOWN, DOWN, DOWN, sample, DOWN, sample))
    with caplog.at_level(logging.WARNING, logger="cronwheel.clock"):
        await asyncio.wait_for(keep_anchored(AnchoredClock(), roles.store, stop, "n1", 0.001, FAST), 10)
    assert waits(caplog) == [0.01, 0.02, 0.04, 0.01]
