"""The embedded server applies the default retention on its own: runs older
than ``retention_days`` go at start, the latest of each state and the runs of a job that opted
out stay, and the pass is counted and logged."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronwheel.model import Firing, HttpTarget, Job, RetentionPolicy, Run, RunKind, RunState, new_id
from cronwheel.node.server import ServerSettings, serve
from cronwheel.store.port import RunQuery
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.telemetry import metrics

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


async def _old_history(store: SqlStore, name: str, retention: RetentionPolicy | None) -> str:
    target = HttpTarget("https://example.com/hook")
    job = Job(new_id(), "ops", name, "* * * * *", target, paused=True, retention=retention, next_run_at=START)
    job = await store.create_job(job)
    made = tuple(
        Run(new_id(), job.id, RunKind.SCHEDULED, START + i * timedelta(minutes=1), RunState.SKIPPED)
        for i in range(5)
    )
    await store.fire([Firing(job.id, job.version, START, START + timedelta(days=1), made)], START)
    return job.id


async def _count(store: SqlStore, job_id: str) -> int:
    return len((await store.list_runs(RunQuery(job_id=job_id))).items)


async def test_the_embedded_server_purges_old_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = await open_store(url)
    try:
        defaulted = await _old_history(store, "defaulted", None)
        opted_out = await _old_history(store, "opted-out", RetentionPolicy())
    finally:
        await store.close()
    before = metrics.RUNS_PURGED._value.get()
    settings = ServerSettings(database_url=url, port=0, node="n1", retention_days=30)  # START is months ago
    announced = asyncio.Event()
    with caplog.at_level(logging.INFO, logger="cronwheel.retention"):
        node = asyncio.create_task(serve(settings, announce=lambda _: announced.set()))
        await asyncio.wait_for(announced.wait(), 20)
        for _ in range(200):
            if any(getattr(record, "action", None) == "purge" for record in caplog.records):
                break
            await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(node, 60)
    (line,) = [record for record in caplog.records if getattr(record, "action", None) == "purge"]
    assert (line.purged, line.jobs) == (4, 1)  # type: ignore[attr-defined]
    assert metrics.RUNS_PURGED._value.get() - before == 4
    store = await open_store(url)
    try:
        assert await _count(store, defaulted) == 1  # its latest SKIPPED run stays
        assert await _count(store, opted_out) == 5
    finally:
        await store.close()
