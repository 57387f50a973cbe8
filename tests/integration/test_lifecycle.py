"""What a node opens is closed whatever fails, and a permanent error stops it at once (issue #10
items 6 and 7); in process, over the embedded backends."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from cronwheel.coordinator.local import LocalCoordinator
from cronwheel.errors import PermanentError
from cronwheel.queue.memory import MemoryQueue
from cronwheel.server import ServerSettings, _unless_stopped, serve
from cronwheel.store.sql import SqlStore


def _record_closes(monkeypatch: pytest.MonkeyPatch, closed: list[str]) -> None:
    def spy(cls: Any, method: str, name: str) -> None:
        original: Callable[..., Awaitable[None]] = getattr(cls, method)

        async def wrapper(self: Any) -> None:
            closed.append(name)
            await original(self)

        monkeypatch.setattr(cls, method, wrapper)

    spy(MemoryQueue, "close", "queue")
    spy(SqlStore, "close", "store")
    spy(LocalCoordinator, "stop", "coordinator")


async def test_a_coordinator_that_refuses_to_start_closes_the_queue_and_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    _record_closes(monkeypatch, closed)

    async def refuse(self: LocalCoordinator) -> None:
        raise PermanentError("the coordinator refused this node")

    monkeypatch.setattr(LocalCoordinator, "start", refuse)
    settings = ServerSettings(database_url=f"sqlite:///{tmp_path / 'c.db'}", port=0, node="n1")
    started = time.monotonic()
    with pytest.raises(PermanentError, match="refused this node"):
        await serve(settings, announce=lambda _: None)
    assert time.monotonic() - started < 10  # at once: a permanent error is not retried
    assert closed == ["queue", "store"]  # in reverse order of opening; the coordinator never started


async def test_a_port_in_use_stops_the_node_before_it_touches_a_backend(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = ServerSettings(database_url=f"sqlite:///{tmp_path / 'c.db'}", port=port, node="n1")
        with pytest.raises(PermanentError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve(settings, announce=lambda _: None)
    assert not (tmp_path / "c.db").exists()  # the store was never opened


async def test_a_node_that_stops_closes_everything_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    _record_closes(monkeypatch, closed)
    settings = ServerSettings(database_url=f"sqlite:///{tmp_path / 'c.db'}", port=0, node="n1")
    announced = asyncio.Event()
    node = asyncio.create_task(serve(settings, announce=lambda _: announced.set()))
    await asyncio.wait_for(announced.wait(), 20)
    assert closed == []
    os.kill(os.getpid(), signal.SIGTERM)  # handled by the node (serve installs the handler first)
    await asyncio.wait_for(node, 60)
    assert closed == ["coordinator", "queue", "store"]


async def test_a_one_off_task_cut_short_by_the_stop_ends_quietly() -> None:
    """The stop cancels the refused-jobs check; a task needs a turn of the loop to be cancelled,
    and asking its result before then raised InvalidStateError out of the node's task group (one
    stop in five of the test above, when the check was still reading the store)."""
    stop = asyncio.Event()
    cleaned_up: list[bool] = []

    async def slow_to_cancel() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # a clean-up that awaits, as closing a store connection does
            cleaned_up.append(True)

    running = asyncio.create_task(_unless_stopped(slow_to_cancel(), stop))
    await asyncio.sleep(0)
    stop.set()
    await asyncio.wait_for(running, 5)
    assert cleaned_up == [True]
