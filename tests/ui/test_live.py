"""``static/ui/live.js`` in a real headless Chromium against a real ``cronwheel server``: on the
dashboard's page, logged in, ``follow`` opens an EventSource through the session bridge and hears
a job created through the API and its manual run; it falls back to polling when the browser has
no EventSource and when the stream is refused (a job that does not exist), and ``stop`` ends the
polling. Every wait is for a state of the page but one: after ``stop``, four polling periods pass
to show that nothing more comes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect
from server_harness import ServerProcess, Sink

from .session import WAIT_MS, admin_page

pytestmark = [pytest.mark.integration, pytest.mark.browser]

# Run in the dashboard's page (its CSP allows this origin's modules): follow() with the events
# kept in window.heard, and the stop function in window.stopLive.
FOLLOW = """async ([topics, options]) => {
    const live = await import("./assets/live.js");
    window.heard = [];
    window.stopLive = live.follow(topics, (event) => window.heard.push(event), options);
}"""


async def _heard(page: Page, condition: str) -> Any:
    """Wait until an event in window.heard meets ``condition`` (a JS expression of ``e``)."""
    found = await page.wait_for_function(f"() => window.heard.find((e) => {condition})", timeout=WAIT_MS)
    return await found.json_value()


async def test_follow_hears_a_job_and_its_run_through_the_session(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    _, page, errors = await admin_page(browser, server)
    await page.evaluate(FOLLOW, [["jobs", "runs"], {}])
    await _heard(page, "e && e.type === 'reload'")  # told at the opening
    job = {
        "team": "data",
        "name": "live",
        "schedule": "0 3 * * *",
        "timezone": "UTC",
        "target": {"type": "http", "url": sink.answer("/live", (200, 0.0))},
    }
    async with server.client() as api:
        created = (await api.post("/v1/jobs", json=job)).json()
        heard = await _heard(page, f"e && e.type === 'job' && e.data.id === '{created['id']}'")
        assert heard["data"] == {"id": created["id"], "team": "data", "version": 1}
        run = (await api.post(f"/v1/jobs/{created['id']}/trigger", json={})).json()
    heard = await _heard(page, f"e && e.type === 'run' && e.data.id === '{run['id']}'")
    assert heard["data"]["job_id"] == created["id"]
    assert await page.evaluate("() => window.heard.every((e) => e !== null)")  # never polled
    assert errors == []


@pytest.mark.parametrize(
    ("topics", "options"),
    [
        (["jobs"], {"EventSource": None, "pollMs": 50}),  # a browser without EventSource
        (["job:no-such-job"], {"pollMs": 50}),  # a stream the server refuses (404)
    ],
    ids=["no-eventsource", "refused"],
)
async def test_follow_falls_back_to_polling(
    server_factory: Callable[..., ServerProcess],
    browser: Browser,
    topics: list[str],
    options: dict[str, Any],
) -> None:
    server = server_factory()
    _, page, _ = await admin_page(browser, server)
    await page.evaluate(FOLLOW, [topics, options])
    await page.wait_for_function("() => window.heard.filter((e) => e === null).length >= 3")
    await page.evaluate("() => { window.stopLive(); window.heard = []; }")
    await page.wait_for_timeout(200)  # four polling periods: none may come after stop()
    assert await page.evaluate("() => window.heard.length") == 0


async def test_pages_redraw_on_events_without_polling(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """The jobs page shows a job created through the API, and the job page a run triggered through
    the API, without a reload; between changes neither page asks the API again (it would every two
    seconds if it polled), and leaving a page closes its stream."""
    server = server_factory()
    _, page, _ = await admin_page(browser, server)
    reads: list[str] = []
    page.on("request", lambda request: reads.append(request.url) if "/ui/api/v1/" in request.url else None)
    await page.goto(f"{server.url}/ui/#/jobs")
    await expect(page.locator("#view")).to_contain_text("No jobs")
    job = {
        "team": "data",
        "name": "pushed",
        "schedule": "0 3 * * *",
        "timezone": "UTC",
        "target": {"type": "http", "url": sink.answer("/pushed", (200, 0.0))},
    }
    async with server.client() as api:
        created = (await api.post("/v1/jobs", json=job)).json()
        await expect(page.locator("#view")).to_contain_text("pushed")
        await page.goto(f"{server.url}/ui/#/jobs/{created['id']}")
        await expect(page.locator("#view h1, #view h2").first).to_contain_text("pushed")
        await page.wait_for_timeout(1500)  # the redraw the stream's opening asks for
        quiet = len(_polls(reads))
        await page.wait_for_timeout(5000)  # two and a half polling periods, and no change
        assert len(_polls(reads)) == quiet, _polls(reads)
        await api.post(f"/v1/jobs/{created['id']}/trigger", json={})
        await expect(page.locator("tr[data-run]")).to_have_count(1)
    streams = [url for url in reads if "/v1/events" in url]
    assert len(streams) == 2, streams  # one per page shown, none of the jobs page's left open
    assert "topics=job%3A" in streams[1]


def _polls(reads: list[str]) -> list[str]:
    return [url for url in reads if "/v1/events" not in url]
