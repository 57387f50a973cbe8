"""A calendar job through a real ``cronwheel server``: every slot of a closed day is recorded
SKIPPED (reason ``calendar``) and nothing reaches the target; once the calendar opens the day
again, the same job fires (the edit reached the server's scheduler without a restart)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from server_harness import Sink, wait_for

pytestmark = pytest.mark.integration
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


async def _runs(api: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/jobs/{job_id}/runs", params={"limit": 500})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_a_closed_day_is_skipped_and_an_opened_one_fires(api: httpx.AsyncClient, sink: Sink) -> None:
    made = await api.post("/v1/teams/it/calendars", json={"name": "closed", "weekdays": EVERY_DAY})
    assert made.status_code == 201, made.text
    url = sink.answer("/closed", (200, 0))
    body = {
        "team": "it",
        "name": "closed-job",
        "schedule": "* * * * * *",
        "target": {"type": "http", "url": url},
    }
    created = await api.post("/v1/jobs", json={**body, "calendars": ["closed"]})
    assert created.status_code == 201, created.text
    job = created.json()

    skipped = await wait_for(lambda: _at_least(api, job["id"], 3), timeout=8)
    assert {(run["state"], run["reason"]) for run in skipped} == {("SKIPPED", "calendar")}
    assert sink.at("/closed") == []  # none fired

    opened = await api.put("/v1/teams/it/calendars/closed", json={"dates": ["1999-01-01"]})
    assert opened.status_code == 200, opened.text
    await wait_for(lambda: len(sink.at("/closed")) >= 2, timeout=8)
    runs = await _runs(api, job["id"])
    assert {run["state"] for run in runs} >= {"SKIPPED", "SUCCESS"}


async def _at_least(api: httpx.AsyncClient, job_id: str, count: int) -> list[dict[str, Any]] | None:
    runs = await _runs(api, job_id)
    return runs if len(runs) >= count else None
