"""The dashboard knows its caller: a read-only token of one team sees no write action on the jobs,
job and run pages (hidden, not disabled), no admin page in the navigation, another team's job and a
missing run as "not found" pages and the cluster page as "not allowed". Times show in the viewer's
zone (the browser context's, here New York) with UTC on hover, or in UTC when chosen in the header,
a choice that outlives a reload. The cluster page draws each node's share of the shards as one bar
and draws the shard table only when asked.

Screenshots go to reports/ui-screenshots/ (docs/images/ui-*.png are copies).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, Page, Route, expect
from server_harness import ServerProcess, Sink

from cronwheel.model import SHARDS

from .session import WAIT_MS, log_in, screenshot
from .test_dashboard import _job

pytestmark = [pytest.mark.integration, pytest.mark.browser]
VIEWER_ZONE = "America/New_York"
WRITE_CONTROLS = ", ".join(
    [
        "#pause",
        "#resume",
        "#pause-note",
        "#trigger",
        "#edit",
        "#delete",
        "#backfill-form",
        "[data-cancel-backfill]",
    ]
)


async def _context(browser: Browser, **options: Any) -> tuple[BrowserContext, Page, list[str]]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, **options)
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return context, page, errors


async def _token(api: httpx.AsyncClient, team: str | None, *scopes: str) -> str:
    body = {"name": f"{team}-{'-'.join(scopes)}", "team": team, "scopes": scopes}
    answer = await api.post("/v1/tokens", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["token"])


async def test_a_read_only_token_sees_no_write_action_and_no_admin_page(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    async with server.client() as api:
        ours = (await api.post("/v1/jobs", json=_job(sink, "ours") | {"schedule": "0 * * * *"})).json()
        theirs = (await api.post("/v1/jobs", json=_job(sink, "theirs") | {"team": "ops"})).json()
        run = (await api.post(f"/v1/jobs/{ours['id']}/trigger", json={})).json()
        assert (await api.post(f"/v1/jobs/{ours['id']}/pause", json={})).status_code == 200
        span = {
            "from": (hour - timedelta(hours=3)).isoformat(),
            "to": (hour - timedelta(minutes=1)).isoformat(),
        }
        assert (await api.post(f"/v1/jobs/{ours['id']}/backfills", json=span)).status_code == 202
        reader = await _token(api, "data", "read")
    context, page, errors = await _context(browser)
    await log_in(page, server.url, reader)
    await expect(page.locator("#whoami")).to_contain_text("data · read")

    # the jobs page: the team's job only, and no "New job" or "Cluster" in the navigation
    await expect(page.locator("#jobs tr[data-job]")).to_have_count(1)
    await expect(page.locator("[data-nav=jobs]")).to_be_visible()
    await expect(page.locator("[data-nav=new]")).to_be_hidden()
    await expect(page.locator("[data-nav=cluster]")).to_be_hidden()
    await screenshot(page, "jobs-read-only")

    # the job page: its definition, its running backfill and its runs, and no control that writes
    await page.click(f"#jobs tr[data-job='{ours['id']}'] a")
    await expect(page.locator("#definition")).to_be_visible()
    await expect(page.locator("#backfills tr[data-state=running]")).to_have_count(1)
    await expect(page.locator("#runs tr[data-run]").first).to_be_visible()
    await expect(page.locator(WRITE_CONTROLS)).to_have_count(0)
    await screenshot(page, "job-read-only")

    # the run page: no button at all
    await page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    await expect(page.locator("#attempts")).to_be_visible()
    await expect(page.locator("main button, main form")).to_have_count(0)

    # the job form by its address: not allowed, and says which scope it needs
    await page.goto(f"{server.url}/ui/#/new")
    await expect(page.locator("#missing[data-kind=not-allowed]")).to_contain_text("needs the 'write' scope")
    await expect(page.locator("#job-form")).to_have_count(0)

    # another team's job: not found, exactly as a missing one; a way back to the jobs
    await page.goto(f"{server.url}/ui/#/jobs/{theirs['id']}")
    missing = page.locator("#missing[data-kind=not-found]")
    await expect(missing.locator("h1")).to_have_text("Not found")
    await expect(missing).to_contain_text(f"job {theirs['id']} not found")
    await expect(page.locator("#definition")).to_have_count(0)
    await screenshot(page, "not-found")
    await page.goto(f"{server.url}/ui/#/runs/no-such-run")
    await expect(page.locator("#missing[data-kind=not-found]")).to_contain_text("run no-such-run not found")
    await page.click("#back-to-jobs")
    await expect(page.locator("#jobs tr[data-job]")).to_have_count(1)

    # the cluster page: not allowed (the API asks for an admin of every team), without asking it
    await page.goto(f"{server.url}/ui/#/cluster")
    refused = page.locator("#missing[data-kind=not-allowed]")
    await expect(refused.locator("h1")).to_have_text("Not allowed")
    await expect(refused).to_contain_text("an admin token of every team; this session has read of team data")
    await screenshot(page, "cluster-not-allowed")
    assert errors == []
    await context.close()


async def test_an_admin_of_one_team_may_write_but_not_open_the_cluster_page(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    async with server.client() as api:
        job = (await api.post("/v1/jobs", json=_job(sink, "ours") | {"schedule": "0 3 * * *"})).json()
        admin = await _token(api, "data", "admin")
    context, page, errors = await _context(browser)
    await log_in(page, server.url, admin)
    await expect(page.locator("[data-nav=new]")).to_be_visible()
    await expect(page.locator("[data-nav=cluster]")).to_be_hidden()
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    for control in ("#pause", "#trigger", "#edit", "#delete", "#backfill-form"):
        await expect(page.locator(control)).to_be_visible()
    await page.goto(f"{server.url}/ui/#/cluster")
    await expect(page.locator("#missing[data-kind=not-allowed]")).to_contain_text("admin of team data")
    assert errors == []
    await context.close()


def _shown(iso: str, zone: str) -> str:
    return datetime.fromisoformat(iso).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")


async def test_times_show_in_the_viewers_zone_or_utc_as_chosen(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    async with server.client() as api:
        job = (await api.post("/v1/jobs", json=_job(sink, "nightly") | {"schedule": "0 3 * * *"})).json()
    context, page, errors = await _context(browser, timezone_id=VIEWER_ZONE)
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#zone")).to_have_value("local")
    shown = page.locator(f"#jobs tr[data-job='{job['id']}'] time").first
    instant = await shown.get_attribute("datetime")
    assert instant is not None
    local, utc = _shown(instant, VIEWER_ZONE), _shown(instant, "UTC")
    assert local != utc
    await expect(shown.locator(".stamp")).to_have_text(f"{local} EST")
    await expect(shown).to_have_attribute("title", f"{utc} UTC")  # UTC on hover
    await shown.hover()
    await screenshot(page, "jobs-local-time")

    await page.select_option("#zone", "utc")
    await expect(shown.locator(".stamp")).to_have_text(f"{utc} UTC")  # at once, without a redraw
    await page.reload()
    await expect(page.locator("#zone")).to_have_value("utc")  # remembered
    again = page.locator(f"#jobs tr[data-job='{job['id']}'] time .stamp").first
    await expect(again).to_have_text(f"{utc} UTC")
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    await expect(page.locator("#upcoming li time .stamp").first).to_have_text(f"{utc} UTC")
    await page.select_option("#zone", "local")
    await expect(page.locator("#upcoming li time .stamp").first).to_have_text(f"{local} EST")
    assert errors == []
    await context.close()


async def test_the_cluster_page_draws_the_shares_of_shards_and_the_table_on_demand(
    server_factory: Callable[..., ServerProcess], browser: Browser
) -> None:
    server = server_factory()
    context, page, errors = await _context(browser)
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("[data-nav=cluster]")).to_be_visible()

    # an embedded server: its one node owns every shard
    await page.click("[data-nav=cluster]")
    bar = page.locator("#shard-share svg.shard-bar")
    await expect(bar.locator("rect.seg")).to_have_count(1)
    await expect(bar.locator("rect.seg").first).to_have_attribute("data-shards", str(SHARDS))
    await expect(page.locator("#shards")).to_have_count(0)  # not drawn until asked
    await page.click("#show-shards")
    await expect(page.locator("#shards tbody tr")).to_have_count(SHARDS)
    await page.click("#show-shards")
    await expect(page.locator("#shards")).to_have_count(0)

    # three nodes sharing the shards, some unowned: a segment each, sized by its count
    owners = {"node-a": range(0, 128), "node-b": range(128, 192), "node-c": range(192, 240)}

    async def spread(route: Route) -> None:
        answer = await route.fetch()
        data = await answer.json()
        data["shards"] = [{"shard": s, "node": n, "epoch": 3} for n, shards in owners.items() for s in shards]
        await route.fulfill(response=answer, json=data)

    await page.route("**/ui/api/v1/cluster", spread)
    await page.reload()  # drawn from the rewritten answer now, not at the page's next redraw
    segments = page.locator("#shard-share svg.shard-bar rect.seg")
    await expect(segments).to_have_count(4)
    counts = [await segment.get_attribute("data-shards") for segment in await segments.all()]
    nodes = [await segment.get_attribute("data-node") for segment in await segments.all()]
    assert (nodes, counts) == (["node-a", "node-b", "node-c", "unowned"], ["128", "64", "48", "16"])
    widths = [float(await segment.get_attribute("width") or 0) for segment in await segments.all()]
    assert widths == [128, 64, 48, 16]
    unowned = page.locator("#shard-share li[data-node=unowned]")
    await expect(unowned).to_contain_text("16 of 256 shards (6.3 %)")
    await screenshot(page, "cluster-shards")
    await page.click("#show-shards")
    rows = page.locator("#shards tbody tr")
    await expect(rows).to_have_count(SHARDS)
    await expect(rows.nth(250)).to_contain_text("none")
    assert errors == []
    await context.close()
