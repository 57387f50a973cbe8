"""An armed run (recorded before its slot by a scheduler with ``arm_ahead_s``) is shown as it is
stored: PENDING, its slot ahead, not queued; a pause before the slot removes it (no SKIPPED
record) and moves the job's next run back to its slot (docs/service.md, Runs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import httpx

from cronwheel.queue import Queue
from cronwheel.scheduler.loop import Scheduler

from .conftest import START, Env, job_body

SLOT = START + timedelta(minutes=1)
SLOT_TEXT = "2026-03-02T12:01:00Z"


async def _armed(client: httpx.AsyncClient, env: Env) -> tuple[dict[str, Any], str]:
    created = await client.post("/v1/jobs", json=job_body(schedule="* * * * *", timezone="UTC"))
    assert created.status_code == 201, created.text
    scheduler = Scheduler(env.store, cast(Queue, env.queue), env.clock, "armer", arm_ahead_s=30)
    env.clock.set(SLOT - timedelta(seconds=1))
    await scheduler.tick(env.clock.now())
    listed = (await client.get(f"/v1/jobs/{created.json()['id']}/runs")).json()["items"]
    assert len(listed) == 1
    assert env.queue.published == []  # recorded, not released
    return created.json(), listed[0]["id"]


async def test_an_armed_run_reads_pending_with_its_slot_ahead(client: httpx.AsyncClient, env: Env) -> None:
    job, run_id = await _armed(client, env)
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert (run["state"], run["slot"], run["queued_at"], run["queued_lateness_s"]) == (
        "PENDING", SLOT_TEXT, None, None,
    )  # fmt: skip
    assert run["created_at"] == "2026-03-02T12:00:59Z"
    shown = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert shown["last_run"]["id"] == run_id
    assert shown["next_run_at"] == "2026-03-02T12:02:00Z"  # the first slot not yet recorded


async def test_a_pause_before_the_slot_removes_the_armed_run(client: httpx.AsyncClient, env: Env) -> None:
    job, run_id = await _armed(client, env)
    paused = await client.post(f"/v1/jobs/{job['id']}/pause")
    assert paused.status_code == 200
    assert paused.json()["next_run_at"] == SLOT_TEXT
    assert (await client.get(f"/v1/runs/{run_id}")).status_code == 404
    assert (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"] == []
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["last_run"] is None
