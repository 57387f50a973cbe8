"""What a node opens is closed whatever fails, and a permanent error stops it at once; in
process, over the embedded backends."""

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
from cronwheel.node.server import ServerSettings, _unless_stopped, serve
from cronwheel.queue.memory import MemoryQueue
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


async def test_a_one_off_task_cut_short_by_stop_ends_quietly() -> None:
    """A node stopped while its one-off start-up check still runs (SIGTERM right after start)
    cancels the check and stops cleanly. It raised ``InvalidStateError: Result is not set`` (the
    check was asked to cancel, not yet cancelled, and its result was read), which turned a clean
    SIGTERM into a traceback: test_a_node_that_stops_closes_everything_it_opened failed that way
    on a loaded machine."""
    stop = asyncio.Event()
    cancelled: list[bool] = []

    async def slow_check() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    asyncio.get_running_loop().call_later(0.01, stop.set)
    await asyncio.wait_for(_unless_stopped(slow_check(), stop), 5)
    assert cancelled == [True]


async def test_a_one_off_task_that_fails_still_fails_the_node() -> None:
    async def broken() -> None:
        raise RuntimeError("the check failed")

    with pytest.raises(RuntimeError, match="the check failed"):
        await _unless_stopped(broken(), asyncio.Event())
