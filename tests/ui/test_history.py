"""History in the dashboard, in a real headless Chromium against a real ``cronwheel server``: the
runs page across jobs, filtered (team, skip reason, a range of slots, a refused filter) and paged
by the API's cursor; a job's whole history paged; a run page showing an attempt's kept output
beyond the 1 KiB excerpt; and the output of a running command's attempt appearing on its run page
line by line as its worker writes it, then its kept output at the attempt's end, without a reload.

Every wait is for an element or a state, never a sleep.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from server_harness import ServerProcess, Sink, wait_for

from .session import admin_page, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _http_job(sink: Sink, name: str, team: str = "data", **fields: Any) -> dict[str, Any]:
    target = {"type": "http", "url": sink.answer(f"/{name}", (200, 0.0))}
    return {
        "team": team,
        "name": name,
        "schedule": "0 3 * * *",
        "timezone": "UTC",
        "target": target,
        **fields,
    }


async def _triggered(api: httpx.AsyncClient, job: dict[str, Any], count: int) -> list[str]:
    """``count`` manual runs of ``job``, once each has succeeded (newest first)."""
    ids = []
    for _ in range(count):
        answer = await api.post(f"/v1/jobs/{job['id']}/trigger", json={})
        assert answer.status_code in (200, 201, 202), answer.text
        ids.append(answer.json()["id"])

    async def done() -> bool:
        page = (
            await api.get(f"/v1/jobs/{job['id']}/runs", params={"state": "SUCCESS", "limit": 1000})
        ).json()
        return len(page["items"]) >= count

    await wait_for(done, timeout=30)
    return list(reversed(ids))


async def _shown(page: Page, rows: str, count: int) -> list[str]:
    located = page.locator(rows)
    await expect(located).to_have_count(count)
    return [await row.get_attribute("data-run") or "" for row in await located.all()]


async def test_the_runs_page_filters_and_pages_runs_across_jobs(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    every_day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    async with server.client() as api:
        alpha = (await api.post("/v1/jobs", json=_http_job(sink, "alpha"))).json()
        assert (
            await api.post("/v1/teams/ops/calendars", json={"name": "closed", "weekdays": every_day})
        ).status_code == 201
        gated = _http_job(sink, "gated", team="ops", schedule="* * * * * *", calendars=["closed"])
        gated = (await api.post("/v1/jobs", json=gated)).json()  # every second, each slot SKIPPED (calendar)
        await _triggered(api, alpha, 7)

        async def skipped() -> bool:
            runs = (await api.get("/v1/runs", params={"team": "ops", "reason": "calendar"})).json()["items"]
            return len(runs) >= 2

        await wait_for(skipped, timeout=20)
        assert (await api.post(f"/v1/jobs/{gated['id']}/pause", json={})).status_code == 200
    context, page, errors = await admin_page(browser, server)

    # team data, 3 a page: 3, 3, 1 by the cursor, then back; every run alpha's, newest slot first
    await page.click("[data-nav=runs]")
    await expect(page.locator("#run-filters")).to_be_visible()
    await expect(page.locator("#run-list tr[data-state=SKIPPED]").first).to_be_visible()
    await screenshot(page, "runs")
    await page.goto(f"{server.url}/ui/#/runs?team=data&limit=3")
    rows = "#run-list tr[data-run]"
    first = await _shown(page, rows, 3)
    await expect(page.locator("#prev")).to_be_disabled()
    await page.click("#next")
    await expect(page.locator(rows).first).not_to_have_attribute("data-run", first[0])
    second = await _shown(page, rows, 3)
    await page.click("#next")
    third = await _shown(page, rows, 1)
    await expect(page.locator("#next")).to_be_disabled()
    await expect(page.locator("#where")).to_have_text("page 3 · 1 runs")
    assert len(set(first + second + third)) == 7
    for row in await page.locator(rows).all():
        await expect(row).to_contain_text("data/alpha")
    await page.click("#prev")
    await expect(page.locator(rows).first).to_have_attribute("data-run", second[0])
    await page.click("#prev")
    await expect(page.locator(rows).first).to_have_attribute("data-run", first[0])

    # the form: skipped for a calendar (any team) lists the gated job's SKIPPED runs only
    await page.fill("#run-filters [name=team]", "")
    await page.select_option("#run-filters [name=reason]", "calendar")
    await page.click("#run-filters button")
    await expect(page).to_have_url(re.compile(r"#/runs\?reason=calendar$"))
    skipped_rows = page.locator(rows)
    await expect(skipped_rows.first).to_contain_text("ops/gated")
    assert await page.locator(f"{rows}:not([data-state=SKIPPED])").count() == 0
    assert await page.locator(rows, has_text="data/alpha").count() == 0
    await expect(skipped_rows.first.locator("td").last).to_have_text("calendar")

    # a range of slots: from the newest alpha run on, then one that starts tomorrow (none)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat(timespec="seconds").replace("+00:00", "Z")
    await page.goto(f"{server.url}/ui/#/runs?since={tomorrow}")
    await expect(page.locator("#run-list td.muted")).to_have_text("No runs match.")
    async with server.client() as api:
        slot = (await api.get("/v1/runs", params={"team": "data", "limit": 1})).json()["items"][0]["slot"]
    await page.goto(f"{server.url}/ui/#/runs?team=data&since={slot}")
    await _shown(page, rows, 1)
    await expect(page.locator(rows)).to_have_attribute("data-run", first[0])

    # a refused filter: the API's problem, naming the field, and no rows
    await page.goto(f"{server.url}/ui/#/runs?since=yesterday")
    await expect(page.locator("[role=alert]")).to_contain_text("since")
    await expect(page.locator(rows)).to_have_count(0)
    assert errors == []
    await context.close()


async def test_a_jobs_whole_history_is_paged_on_its_page(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """31 runs, 25 a page: the newest 25, then the oldest 6, and back."""
    server = server_factory()
    async with server.client() as api:
        job = (await api.post("/v1/jobs", json=_http_job(sink, "history"))).json()
        newest_first = await _triggered(api, job, 31)
    context, page, errors = await admin_page(browser, server)
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    rows = "#runs tr[data-run]"
    first = await _shown(page, rows, 25)
    await expect(page.locator("#runs-prev")).to_be_disabled()
    await page.click("#runs-next")
    older = await _shown(page, rows, 6)
    await expect(page.locator("#runs-next")).to_be_disabled()
    assert first + older == newest_first  # every run once, newest first
    await page.click("#runs-prev")
    await expect(page.locator(rows).first).to_have_attribute("data-run", first[0])
    await _shown(page, rows, 25)
    await page.click("#filter-runs")
    await expect(page).to_have_url(re.compile(rf"#/runs\?job_id={job['id']}$"))
    await _shown(page, "#run-list tr[data-run]", 31)
    assert errors == []
    await context.close()


async def test_a_run_page_shows_more_than_a_kib_of_kept_output(
    server_factory: Callable[..., ServerProcess], browser: Browser
) -> None:
    server = server_factory("--allow-commands")
    script = "for i in $(seq 1 200); do echo line-$i-of-the-kept-output; done"
    async with server.client() as api:
        job = {"team": "data", "name": "chatty", "schedule": "0 3 * * *", "timezone": "UTC"}
        job = (
            await api.post(
                "/v1/jobs", json=job | {"target": {"type": "command", "argv": ["sh", "-c", script]}}
            )
        ).json()
        (run_id,) = await _triggered(api, job, 1)
        excerpt = (await api.get(f"/v1/runs/{run_id}")).json()["attempt_details"][0]["output"]
    assert len(excerpt.encode()) <= 1024  # the run's details hold the excerpt only
    context, page, errors = await admin_page(browser, server)
    await page.goto(f"{server.url}/ui/#/runs/{run_id}")
    kept = page.locator("#output [data-output='1']")
    await expect(kept).to_have_attribute("data-kept", "longer")
    text = await kept.locator("pre").inner_text()
    assert len(text.encode()) > 4096
    assert "line-1-of-the-kept-output" in text
    assert text.rstrip().endswith("line-200-of-the-kept-output")
    await expect(page.locator("#attempts tr[data-attempt='1'] td.duration")).to_have_text(
        re.compile(r"^\d+\.\d{3} s$")
    )
    assert errors == []
    await context.close()


async def test_the_tail_of_a_running_command_shows_each_line_as_it_comes(
    server_factory: Callable[..., ServerProcess], browser: Browser
) -> None:
    server = server_factory("--allow-commands")
    context, page, errors = await admin_page(browser, server)
    async with server.client() as api:
        spec = {"team": "data", "name": "slow", "schedule": "0 3 * * *", "timezone": "UTC"}
        argv = ["sh", "-c", "echo first; sleep 3; echo second; sleep 3"]
        job = (await api.post("/v1/jobs", json=spec | {"target": {"type": "command", "argv": argv}})).json()
        run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
    await page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    await page.evaluate("window.notReloaded = true")
    await expect(page.locator("#tail-note")).to_contain_text("line by line")
    live = page.locator("#output [data-output='1'][data-kept=running] pre")
    # the first line while the command sleeps, before the second exists; the attempt runs on
    await expect(live).to_have_text("first\n", timeout=5_000)
    await expect(page.locator("#attempts tr[data-attempt='1'] td.duration")).to_have_text("running")
    # then the second, appended to the same element by the event stream (no reload, no redraw)
    await live.evaluate("pre => { pre.dataset.mine = 'yes'; }")
    await expect(live).to_have_text("first\nsecond\n", timeout=5_000)
    assert await live.get_attribute("data-mine") == "yes"
    # at the end, the attempt's kept output, and no more tail
    await expect(page.locator("#output [data-output='1'][data-kept=whole] pre")).to_have_text(
        "first\nsecond", timeout=10_000
    )
    await expect(page.locator("#tail-note")).to_have_count(0)
    assert await page.evaluate("window.notReloaded") is True
    assert errors == []
    await context.close()
