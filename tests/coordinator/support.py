"""Helpers for the coordinator tests: who owns what, and a monitor for double ownership."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import pytest

from cronwheel.coordinator import Coordinator
from cronwheel.coordinator.plan import rendezvous


def owners(nodes: Sequence[Coordinator]) -> dict[int, list[str]]:
    """shard -> the nodes that claim it right now."""
    found: dict[int, list[str]] = {}
    for coordinator in nodes:
        for shard in coordinator.owned_shards():
            found.setdefault(shard, []).append(coordinator.node)
    return found


def settled(nodes: Sequence[Coordinator], shards: int) -> bool:
    """Every shard claimed by exactly one of ``nodes``."""
    claims = owners(nodes)
    return len(claims) == shards and all(len(names) == 1 for names in claims.values())


def balanced(nodes: Sequence[Coordinator], shards: int) -> bool:
    """Every shard claimed by exactly the node that rendezvous hashing gives it among ``nodes``
    (not an intermediate state of a rebalance)."""
    wanted = rendezvous(shards, [coordinator.node for coordinator in nodes])
    claims = owners(nodes)
    return all(claims.get(shard) == [owner] for shard, owner in enumerate(wanted))


def ownership(nodes: Sequence[Coordinator]) -> dict[int, tuple[str, int]]:
    """shard -> (node, epoch), for a settled cluster."""
    return {
        shard: (coordinator.node, lease.epoch)
        for coordinator in nodes
        for shard, lease in coordinator.owned_shards().items()
    }


async def eventually(
    check: Callable[[], bool], timeout_s: float, *, interval_s: float = 0.01, what: str = "condition"
) -> float:
    """Poll ``check`` until it holds; how long that took. Fails after ``timeout_s``."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"{what}: not reached within {timeout_s} s")
        await asyncio.sleep(interval_s)
    return time.monotonic() - start


async def eventually_async(
    check: Callable[[], Awaitable[bool]],
    timeout_s: float,
    *,
    interval_s: float = 0.02,
    what: str = "condition",
) -> float:
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout_s:
            pytest.fail(f"{what}: not reached within {timeout_s} s")
        await asyncio.sleep(interval_s)
    return time.monotonic() - start


@dataclass
class OwnershipMonitor:
    """Samples ``owned_shards()`` of every node every couple of milliseconds (all nodes in one
    sample, so one instant) and records every shard claimed by two nodes at once."""

    nodes: list[Coordinator]
    interval_s: float = 0.002
    samples: int = 0
    violations: list[tuple[float, int, str, str]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        seen: dict[int, str] = {}
        for coordinator in self.nodes:
            for shard in coordinator.owned_shards():
                if shard in seen:
                    self.violations.append((time.monotonic(), shard, seen[shard], coordinator.node))
                seen[shard] = coordinator.node
        self.samples += 1

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval_s)

    async def __aenter__(self) -> OwnershipMonitor:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self.sample()

    def assert_never_doubled(self) -> None:
        assert self.samples >= 3, "the monitor hardly ran"
        assert not self.violations, f"shards claimed by two nodes at once: {self.violations[:5]}"
