"""The upcoming fires and a job's history chart in a real headless Chromium against a real
``cronwheel server``: a herd of one team at the top of the hour is the tallest bar and the busiest
bucket, which names its team, in the hour view (per second) and the day view (per minute); a paused
job is not counted. A job's chart covers more runs than the page's table (a backfill's 90), with
axes and a tooltip naming the run under the pointer.

Screenshots go to reports/ui-screenshots/ (docs/images/ui-upcoming.png and ui-job-history.png are
copies). Every wait is
for an element or a state, never a sleep.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.async_api import Browser, expect
from server_harness import ServerProcess, Sink

from .session import SCREENSHOTS, admin_page, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _job(sink: Sink, team: str, name: str, schedule: str) -> dict[str, Any]:
    return {
        "team": team,
        "name": name,
        "schedule": schedule,
        "timezone": "UTC",
        "target": {"type": "http", "url": sink.answer(f"/{name}", (200, 0.0))},
    }


async def test_the_herd_at_the_top_of_the_hour_is_the_tallest_bucket_and_names_its_team(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    bodies = [
        *(_job(sink, "billing", f"herd-{n}", "0 * * * *") for n in range(5)),
        *(_job(sink, "data", f"steady-{n}", "2-59/5 * * * *") for n in range(2)),
        _job(sink, "data", "paused", "0 * * * *"),
    ]
    async with server.client() as api:
        answers = await asyncio.gather(*(api.post("/v1/jobs", json=body) for body in bodies))
        assert {answer.status_code for answer in answers} == {201}
        paused = answers[-1].json()
        assert (await api.post(f"/v1/jobs/{paused['id']}/pause", json={})).status_code == 200
    _, page, errors = await admin_page(browser, server)
    await page.click("a[data-nav=upcoming]")
    busiest = page.locator("#busiest tr[data-bucket]")
    await expect(busiest.first.locator("td").nth(1)).to_have_text("5")
    await expect(busiest.first).to_contain_text("billing 5")
    at = await busiest.first.get_attribute("data-bucket") or ""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00Z", at), at  # the top of an hour
    tallest = page.locator("#herd g[data-total='5']")
    await expect(tallest).to_have_count(1)
    await expect(tallest).to_have_attribute("data-bucket", at)
    await expect(tallest.locator("rect[data-team=billing]")).to_have_count(1)
    assert (
        await page.locator("#herd g[data-total]").evaluate_all(
            "gs => Math.max(...gs.map(g => +g.dataset.total))"
        )
        == 5
    )
    await expect(page.locator("#upcoming-summary")).to_contain_text("of 7 jobs")  # the paused one is not
    await screenshot(page, "upcoming")

    await page.select_option("#span", "day")
    await expect(page).to_have_url(re.compile(r"#/upcoming\?span=day$"))
    await expect(busiest.first).to_contain_text("billing 5")
    await expect(page.locator("#herd g[data-total='5']")).to_have_count(24)  # each top of the hour
    assert errors == []


async def test_a_jobs_chart_covers_its_history_with_a_tooltip(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """90 backfilled runs: the chart draws them all, more than the 25 rows of the table."""
    server = server_factory()
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    async with server.client() as api:
        job = (await api.post("/v1/jobs", json=_job(sink, "data", "minutely", "* * * * *"))).json()
        start, end = minute - timedelta(minutes=90), minute - timedelta(seconds=1)
        body = {"from": start.isoformat(), "to": end.isoformat()}
        made = await api.post(f"/v1/jobs/{job['id']}/backfills", json=body)
        assert made.status_code == 202, made.text
    _, page, errors = await admin_page(browser, server)
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    legend = page.locator("#chart .legend")
    await expect(legend).to_contain_text(re.compile(r"last (9\d|[1-9]\d\d) finished runs"), timeout=60_000)
    await expect(page.locator("#runs tr[data-run]")).to_have_count(25)
    chart = page.locator("#chart svg.history")
    await expect(chart.locator("polyline.late")).to_have_count(1)
    await expect(chart.locator("polyline.took")).to_have_count(1)
    await expect(chart.locator("text.tick")).not_to_have_count(0)  # the axes' labels
    box = await chart.bounding_box()
    assert box is not None
    await page.mouse.move(box["x"] + 60, box["y"] + box["height"] / 2)
    tip = page.locator("#chart-tip")
    await expect(tip).to_contain_text(
        re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:00 UTC · SUCCESS · start lateness")
    )
    await expect(chart).to_have_attribute("data-run", re.compile(".+"))
    await page.locator("#chart").screenshot(path=str(SCREENSHOTS / "ui-job-history.png"))
    assert errors == []
