"""The dead-man's switch outlives the schedulers it watches: with the only scheduler
killed, nobody fires and nobody leads, yet an api or worker node holds the watchdog duty and its
notifier raises ``missed`` within the deadline, the check period and the TTL; a scheduler started
again brings ``back``, once. Over real PostgreSQL, etcd and Redis, with a webhook sink on
loopback; the latency is printed (``pytest -s``) and recorded as a test property."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from cluster_harness import (
    TTL,
    Cluster,
    Sink,
    cluster_fixture,  # noqa: F401 - the `cluster` fixture
)

from cronwheel.notifier.loop import WATCH_EVERY_S as WATCH_S

pytestmark = pytest.mark.integration

DEADLINE_S = 3.0  # the `missed` rule's: a slot without a terminal run 3 s after it is missed


def _events(sink: Sink) -> list[str]:
    return [json.loads(delivery.body)["event"] for delivery in sink.at("/dms")]


def _slot(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def _until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition``; the wall-clock time it first held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.05)
    return time.time()


async def _status(api: httpx.AsyncClient) -> dict[str, Any]:
    response = await api.get("/v1/cluster")
    assert response.status_code == 200, response.text
    status: dict[str, Any] = response.json()
    return status


async def _until_watchdog(api: httpx.AsyncClient, holders: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while (holder := (await _status(api))["watchdog"]) not in holders:
        if time.monotonic() > deadline:
            raise AssertionError(f"watchdog {holder}, not one of {sorted(holders)}, after {timeout} s")
        await asyncio.sleep(0.1)
    return str(holder)


async def test_the_dead_mans_switch_outlives_the_only_scheduler(
    cluster: tuple[Cluster, Sink], record_property: Callable[[str, object], None]
) -> None:
    nodes, sink = cluster
    # the scheduler joins first, so it holds the watchdog duty: its death must hand it over
    scheduler = nodes.start("scheduler", "sched-1")
    api_node = nodes.start("api", "api-1")
    nodes.start("worker", "worker-1")
    async with nodes.client(api_node) as api:
        assert await _until_watchdog(api, {"sched-1"}, 10) == "sched-1"
        rule = {"conditions": ["missed"], "deadline_s": DEADLINE_S,
                "channels": [{"type": "webhook", "url": f"{sink.url}/dms"}]}  # fmt: skip
        put = await api.put("/v1/teams/c/notifications", json={"rules": [rule]})
        assert put.status_code == 200, put.text
        job = {"team": "c", "name": "every-second", "schedule": "* * * * * *",
               "target": {"type": "http", "url": f"{sink.url}/target"}}  # fmt: skip
        created = await api.post("/v1/jobs", json=job)
        assert created.status_code == 201, created.text
        await _until(lambda: len(sink.at("/target")) >= 8, 30, "the job fires")

        scheduler.signal(signal.SIGKILL)  # the only scheduler: nothing fires from now on
        killed_at = time.time()
        missed_at = await _until(lambda: _events(sink) == ["missed"], 40, "missed")
        fired = [_slot(delivery.slot) for delivery in sink.at("/target")]
        first_unfired = max(fired) + 1  # the job fires every second
        status = await _status(api)
        assert status["leader"] is None  # nobody leads: no scheduler is left
        assert status["watchdog"] in {"api-1", "worker-1"}
        assert "sched-1" not in {node["node"] for node in status["nodes"]}

        nodes.start("scheduler", "sched-2")
        back_at = await _until(lambda: _events(sink) == ["missed", "back"], 60, "back")
        await asyncio.sleep(WATCH_S + 2)  # more watch passes: nothing more to say
    assert _events(sink) == ["missed", "back"]
    missed = json.loads(sink.at("/dms")[0].body)
    assert _slot(missed["slot"]) >= first_unfired  # about a slot that never fired
    latency = missed_at - first_unfired
    bound = DEADLINE_S + WATCH_S + TTL
    print(
        f"\nmissed raised {latency:.2f} s after the first slot that never fired "
        f"({missed_at - killed_at:.2f} s after kill -9; bound deadline {DEADLINE_S:g} + check "
        f"{WATCH_S:g} + TTL {TTL:g} = {bound:g} s) by {status['watchdog']}; back "
        f"{back_at - missed_at:.2f} s after missed"
    )
    record_property("missed_latency_s", round(latency, 3))
    assert DEADLINE_S <= latency <= bound
