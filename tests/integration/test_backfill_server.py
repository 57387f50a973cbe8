"""A backfill through `cronwheel server` as a user runs it: the CLI asks for a range of past
slots, the server's backfiller records them and its worker delivers each with its slot; a second
backfill of the same range creates nothing and delivers nothing; one cancelled while it runs at
the server's ``--backfill-rate`` records nothing more."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from server_harness import ServerProcess, Sink, wait_for

pytestmark = pytest.mark.integration


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cronwheel", *args, "--url", server.url]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=False, cwd=server.db.parent
    )


async def delivered(api: httpx.AsyncClient, job_id: str, count: int) -> list[dict[str, Any]] | None:
    runs: list[dict[str, Any]] = (await api.get(f"/v1/jobs/{job_id}/runs")).json()["items"]
    done = [run for run in runs if run["state"] == "SUCCESS"]
    return done if len(done) >= count else None


async def test_a_backfill_runs_each_past_slot_once_and_a_repeat_creates_nothing(
    server: ServerProcess, api: httpx.AsyncClient, sink: Sink
) -> None:
    body = {
        "team": "it",
        "name": "hourly",
        "schedule": "0 * * * *",
        "target": {"type": "http", "url": sink.answer("/bf", (200, 0))},
    }
    job = (await api.post("/v1/jobs", json=body)).json()
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (
        (hour - timedelta(hours=4, minutes=30)).isoformat(),
        (hour - timedelta(minutes=1)).isoformat(),
    )
    slots = [(hour - timedelta(hours=hours)).isoformat().replace("+00:00", "Z") for hours in (4, 3, 2, 1)]

    first = cli(server, "jobs", "backfill", "it/hourly", "--from", start, "--to", end)
    assert first.returncode == 0, first.stderr
    assert "done: 4 created, 0 already had runs" in first.stdout
    assert "4/4 slots" in first.stderr
    runs = await wait_for(lambda: delivered(api, job["id"], 4), timeout=10)
    assert sorted(run["slot"] for run in runs) == slots
    assert {run["kind"] for run in runs} == {"backfill"}
    await wait_for(lambda: len(sink.at("/bf")) >= 4, timeout=5)
    assert sorted(d.headers["X-Cronwheel-Scheduled-At"] for d in sink.at("/bf")) == slots

    again = cli(server, "jobs", "backfill", "it/hourly", "--from", start, "--to", end)
    assert again.returncode == 0, again.stderr
    assert "done: 0 created, 4 already had runs" in again.stdout
    listed = (await api.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"]
    assert [(item["created"], item["existing"], item["state"]) for item in listed] == [
        (0, 4, "done"),
        (4, 0, "done"),
    ]
    assert len((await api.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]) == 4
    assert len(sink.at("/bf")) == 4

    refused = cli(server, "jobs", "backfill", "it/hourly", "--from", end, "--to", start)
    assert refused.returncode == 2
    assert "must be after from" in refused.stderr


async def test_a_backfill_cancelled_while_it_runs_keeps_its_runs_and_records_no_more(
    server_factory: Callable[..., ServerProcess], sink: Sink
) -> None:
    server = server_factory("--backfill-rate", "1")  # one run a second: 60 slots take a minute
    body = {
        "team": "it",
        "name": "minutely",
        "schedule": "* * * * *",
        "target": {"type": "http", "url": sink.answer("/minutely", (200, 0))},
    }
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    start, end = (minute - timedelta(minutes=60)).isoformat(), (minute - timedelta(seconds=1)).isoformat()
    async with server.client() as api:
        job = (await api.post("/v1/jobs", json=body)).json()
        started = cli(server, "jobs", "backfill", "it/minutely", "--from", start, "--to", end, "--no-wait")
        assert started.returncode == 0, started.stderr
        [backfill] = (await api.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"]
        await wait_for(lambda: delivered(api, job["id"], 1), timeout=10)

        cancelled = cli(server, "jobs", "cancel-backfill", "it/minutely", backfill["id"])

        assert cancelled.returncode == 0, cancelled.stderr
        assert f"backfill {backfill['id']} cancelled" in cancelled.stdout
        stopped = (await api.get(f"/v1/jobs/{job['id']}/backfills/{backfill['id']}")).json()
        assert stopped["state"] == "cancelled"
        assert 1 <= stopped["created"] < 30  # one a second (at 20 a second it would be done: 409)
        await asyncio.sleep(2.5)  # two more passes of the backfiller
        runs = [
            run
            for run in (await api.get(f"/v1/jobs/{job['id']}/runs", params={"limit": 100})).json()["items"]
            if run["kind"] == "backfill"
        ]
        assert len(runs) == stopped["created"]  # they stay, and none came after
        again = cli(server, "jobs", "cancel-backfill", "it/minutely", backfill["id"])
        assert again.returncode == 2
        assert "is cancelled, not running" in again.stderr
