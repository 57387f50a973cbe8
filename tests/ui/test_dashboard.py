"""The dashboard in a real headless Chromium against a real ``cronwheel server`` and a local webhook
sink: a wrong token is refused, the printed token logs in, a job made in the page's form (checked by
the API as you type: a bad cron's error appears under its field and goes when fixed, the schedule
in words shows) runs and its runs appear without a reload, then it is paused with a note,
triggered, read (run page), edited (a bad zone named under its field as you type), found by the
filters (the late one finds nothing on a server that keeps up) with its schedule in words and a
sparkline of its runs, seen on the cluster page with its fire-lateness percentiles, and deleted
after a confirmation; the session's cookie is out of the page's reach and logout ends it. A
backfill from a job's page: its dry run, its progress bar, its runs in the history.

Screenshots of each page go to reports/ui-screenshots/ (docs/images/ui-*.png are copies).
Every wait is for an element or a state, never a sleep.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, expect
from server_harness import ServerProcess, Sink, wait_for

from .job_form import fill_job
from .session import WAIT_MS, log_in, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def _job(sink: Sink, name: str) -> dict[str, Any]:
    return {
        "team": "data",
        "name": name,
        "schedule": "* * * * * *",  # every second: runs to watch arrive
        "timezone": "Europe/Berlin",
        "target": {"type": "http", "url": sink.answer(f"/{name}", (200, 0.0))},
        "labels": {"tier": "gold"},
    }


async def _fill(page: Page, spec: dict[str, Any]) -> None:
    """Type ``spec`` into the job form, each value into the control drawn for its field."""
    await fill_job(page, spec)


async def test_a_user_logs_in_and_runs_a_job_from_the_dashboard(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    server = server_factory()
    token = server.token_file.read_text().strip()
    assert re.search(rf"dashboard: {re.escape(server.url)}/ui", server.log.read_text())
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    # a wrong token is refused, and opens no session
    await log_in(page, server.url, "cw_AAAAAAAAAAAA_wrongwrongwrongwrongwrongwrong")
    await expect(page.locator(".login [role=alert]")).to_have_text("Refused: invalid token")
    await expect(page.locator("#nav")).to_be_hidden()
    await screenshot(page, "login-refused")
    assert await context.cookies() == []

    # the printed token logs in: an HttpOnly, SameSite=Strict cookie the page's scripts cannot read
    await page.fill("#token", token)
    await page.click("#login-button")
    await expect(page.locator("#whoami")).to_contain_text("every team")
    (cookie,) = await context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/ui")
    assert token not in cookie["value"]
    assert await page.evaluate("document.cookie") == ""
    assert await page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)") == "{}{}"

    # a job made in the page's form: the API checks it as you type (a bad cron's error under its
    # field, gone when fixed; the schedule in words), then it runs and its runs appear live
    await page.click("[data-nav=new]")
    made = _job(sink, "report")
    await _fill(page, made | {"schedule": "99 * * * * *"})
    schedule_error = page.locator("#error-schedule")
    await expect(schedule_error).to_contain_text("99 is out of range 0-59")
    await expect(page.locator(".field[data-field=schedule]")).to_have_class(re.compile(r"\binvalid\b"))
    await expect(page.locator("#error-name")).to_have_text("")  # only the refused field says so
    await screenshot(page, "new-invalid")
    await page.fill("#field-schedule", "* * * * * *")
    await expect(schedule_error).to_have_text("")
    await expect(page.locator("#schedule-words")).to_have_text("every second")
    await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")
    async with server.client() as api:
        assert (await api.get("/v1/jobs")).json()["items"] == []  # checking wrote nothing
    await page.click("#save")
    await expect(page.locator("h1")).to_contain_text("Job data/report")
    await page.evaluate("window.notReloaded = true")
    await expect(page.locator("#runs tr[data-state=SUCCESS]").first).to_be_visible()
    assert await page.evaluate("window.notReloaded") is True
    await expect(page.locator("#upcoming li").first).to_be_visible()
    await expect(page.locator("#chart polyline.late")).to_have_count(1)  # after two finished runs
    await expect(page.locator("#job-words")).to_have_text("every second")
    await expect(page.locator(".card").first).to_contain_text(f"http POST {made['target']['url']}")
    assert sink.at("/report")
    await screenshot(page, "job")

    # paused with a note: the page says so, and so does the API
    await page.fill("#pause-note", "maintenance window")
    await page.click("#pause")
    await expect(page.locator("#resume")).to_be_visible()
    await expect(page.locator(".card").first).to_contain_text("maintenance window")
    async with server.client() as api:
        jobs = (await api.get("/v1/jobs", params={"name": "report"})).json()["items"]
        (job,) = jobs
        assert (job["paused"], job["pause_note"]) == (True, "maintenance window")
        delivered = len(sink.at("/report"))

        # triggered while paused: one manual run, delivered, shown in the history
        await page.click("#trigger")
        manual = page.locator("#runs tr[data-state=SUCCESS]", has_text="manual")
        await expect(manual).to_have_count(1)
        await wait_for(lambda: len(sink.at("/report")) >= delivered + 1)

        # its run page: the attempt (status 200, timing) and the events
        await manual.locator("a").click()
        await expect(page.locator("#attempts tr[data-attempt='1']")).to_contain_text("200")
        sent = page.locator("#attempts tr[data-attempt='1'] td.headers.sent")  # the headers it sent
        await expect(sent).to_contain_text("Idempotency-Key: ")
        await expect(sent).to_contain_text("X-Cronwheel-Attempt: 1")
        await expect(page.locator("#events tbody tr").last).to_contain_text("SUCCESS")
        await expect(page.locator("main")).to_contain_text("tracing off when it ran")  # no trace id
        await screenshot(page, "run")
        await page.go_back()

        # edited through the API's validation: a wrong zone is named as you type, a right edit saved
        await page.click("#edit")
        await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")
        await page.fill("#field-timezone", "Mars/Olympus")
        await expect(page.locator("#error-timezone")).to_contain_text("unknown time zone '…'")
        await page.fill("#field-timezone", "Europe/Berlin")
        await expect(page.locator("#error-timezone")).to_have_text("")
        await page.fill("#field-description", "edited in the dashboard")
        await page.fill("#field-jitter_s", "0.5")  # below the every-second schedule's gap
        await page.click("#save")
        await expect(page.locator(".card").first).to_contain_text("edited in the dashboard")
        await expect(page.locator("#job-jitter")).to_contain_text("up to 0.5 s after each slot")
        edited = (await api.get(f"/v1/jobs/{job['id']}")).json()
        assert (edited["description"], edited["jitter_s"]) == ("edited in the dashboard", 0.5)
        assert edited["paused"] is True

        # the list, filtered: paused jobs of team data with the label; its last run shown
        await api.post("/v1/jobs", json=_job(sink, "other") | {"schedule": "0 3 * * *", "labels": {}})
        await page.click("[data-nav=jobs]")
        await expect(page.locator("#jobs tr[data-job]")).to_have_count(2)
        await page.click("[data-quick=failing]")
        await expect(page.locator("#jobs td.muted")).to_have_text("No jobs match.")
        await page.click("[data-quick=all]")
        await expect(page.locator("#jobs tr[data-job]")).to_have_count(2)
        await page.select_option("#filters [name=late]", "true")
        await page.click("#filters button")
        await expect(page).to_have_url(re.compile(r"late=true"))
        await expect(page.locator("#jobs td.muted")).to_have_text("No jobs match.")  # the server keeps up
        await page.click("[data-quick=all]")
        report = page.locator(f"#jobs tr[data-job='{job['id']}']")
        await expect(report.locator("td.schedule .words")).to_have_text("every second")
        points = re.compile(r"^([2-9]|1\d|20)$")  # a few runs of the every-second job, at most 20
        await expect(report.locator("svg.spark")).to_have_attribute("data-points", points)
        await expect(report.locator("svg.spark rect.state-SUCCESS").first).to_be_visible()
        other = page.locator("#jobs tr[data-job]", has_text="other")
        await expect(other.locator("td.schedule .words")).to_have_text("at 03:00 every day")
        await expect(other.locator("td.recent")).to_have_text("no runs")
        await screenshot(page, "jobs")
        await page.fill("#filters [name=label]", "tier=gold")
        await page.select_option("#filters [name=paused]", "true")
        await page.click("#filters button")
        rows = page.locator("#jobs tr[data-job]")
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_contain_text("paused")
        await expect(rows.first.locator(".last")).to_contain_text("SUCCESS")

        await page.click("[data-nav=cluster]")
        await expect(page.locator("#nodes tbody tr")).to_have_count(1)
        node = page.locator("#nodes tbody tr").first
        await expect(node).to_contain_text("(leader) (watchdog)")  # one node holds both duties
        mode = "embedded (coordinator local, queue memory)"  # which technologies keep the state
        await expect(page.locator(".card").first).to_contain_text(mode)
        for stat in ("p50", "p90", "p99", "max"):  # the every-second job's fires of the last 5 minutes
            value = page.locator(f"#lateness [data-stat={stat}] strong")
            await expect(value).to_have_text(re.compile(r"^-?\d+\.\d ms$"))
        await expect(page.locator("#lateness")).not_to_contain_text("(0 runs)")
        await screenshot(page, "cluster")

        # deleted after a confirmation (cancel first: nothing happens)
        await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
        await page.click("#delete")
        await page.click("#confirm-cancel")
        assert (await api.get(f"/v1/jobs/{job['id']}")).status_code == 200
        await page.click("#delete")
        await expect(page.locator("#confirm-text")).to_contain_text("data/report")
        await page.click("#confirm-ok")
        await expect(page.locator("#jobs tr[data-job]")).to_have_count(1)
        assert (await api.get(f"/v1/jobs/{job['id']}")).status_code == 404

    # logout ends the session: the old cookie no longer reads anything
    await page.click("#logout")
    await expect(page.locator("#login-form [role=status]")).to_contain_text("Logged out")
    await expect(page.locator("#nav")).to_be_hidden()
    async with httpx.AsyncClient(base_url=server.url) as anonymous:
        stale = await anonymous.get(
            "/ui/api/v1/jobs",
            headers={"Cookie": f"{cookie['name']}={cookie['value']}", "X-Cronwheel-CSRF": "x"},
        )
        assert stale.status_code == 401
    assert errors == []
    await context.close()


async def test_another_site_cannot_act_with_the_session(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """A page of another origin, in the same browser as a logged-in user, posts to the dashboard's
    bridge: the browser withholds the Strict cookie and the guard refuses the cross-site request."""
    server = server_factory()
    context = await browser.new_context()
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#whoami")).to_contain_text("every team")
    other = server.url.replace("127.0.0.1", "localhost")  # another site: another host name
    await page.goto(f"{other}/healthz")
    # a "simple" request (no preflight) is sent but refused; one with the CSRF header (the header
    # value is a guess: the page cannot read the real one) is stopped by the browser's preflight
    answers = await page.evaluate(
        """async ([url, job]) => {
            const simple = await fetch(url, {method: "POST", mode: "no-cors", credentials: "include",
                headers: {"Content-Type": "text/plain"}, body: JSON.stringify(job)});
            let preflighted = "sent";
            try {
                await fetch(url, {method: "POST", credentials: "include", body: JSON.stringify(job),
                    headers: {"Content-Type": "application/json", "X-Cronwheel-CSRF": "guess"}});
            } catch (error) {
                preflighted = "blocked";
            }
            return [simple.type, preflighted];
        }""",
        [f"{server.url}/ui/api/v1/jobs", _job(sink, "csrf")],
    )
    assert answers == ["opaque", "blocked"]
    async with server.client() as api:
        assert (await api.get("/v1/jobs")).json()["items"] == []
    await context.close()


async def test_the_jobs_list_pages_by_cursor(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """11 jobs, 5 a page (the page's limit): pages of 5, 5 and 1 by the API's cursors, and back."""
    server = server_factory()
    async with server.client() as api:
        bodies = [_job(sink, f"job-{n:02}") | {"schedule": "0 3 * * *"} for n in range(11)]
        answers = await asyncio.gather(*(api.post("/v1/jobs", json=body) for body in bodies))
        assert {answer.status_code for answer in answers} == {201}
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#whoami")).to_contain_text("every team")
    await page.goto(f"{server.url}/ui/#/jobs?limit=5")
    rows = page.locator("#jobs tr[data-job]")

    async def shown(count: int) -> list[str]:
        await expect(rows).to_have_count(count)
        return [await row.get_attribute("data-job") or "" for row in await rows.all()]

    first = await shown(5)
    await expect(page.locator("#prev")).to_be_disabled()
    await page.click("#next")
    await expect(rows.first).not_to_have_attribute("data-job", first[0])
    second = await shown(5)
    await page.click("#next")
    third = await shown(1)
    await expect(page.locator("#next")).to_be_disabled()
    async with server.client() as api:
        every = {job["id"] for job in (await api.get("/v1/jobs", params={"limit": 1000})).json()["items"]}
    assert len(every) == 11
    assert set(first) | set(second) | set(third) == every  # no job twice, none missed
    await page.click("#prev")
    await expect(rows.first).to_have_attribute("data-job", second[0])
    await page.click("#prev")
    await expect(rows.first).to_have_attribute("data-job", first[0])
    await context.close()


async def test_a_backfill_from_the_job_page_shows_its_progress(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """A dry run says what a backfill would do and writes nothing; the backfill then shows on the
    job page with a bar of its progress, and its runs in the history as kind backfill."""
    server = server_factory()
    async with server.client() as api:
        created = await api.post(
            "/v1/jobs", json=_job(sink, "hourly") | {"schedule": "0 * * * *", "timezone": "UTC"}
        )
        job = created.json()
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (
        (hour - timedelta(hours=3, minutes=30)).isoformat(),
        (hour - timedelta(minutes=1)).isoformat(),
    )
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#whoami")).to_contain_text("every team")
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    await expect(page.locator("#backfills")).to_contain_text("No backfills.")

    await page.fill("#backfill-from", end)
    await page.fill("#backfill-to", start)
    await page.click("#backfill-dry-run")
    await expect(page.locator("[role=alert]")).to_contain_text("must be after from")
    await page.fill("#backfill-from", start)
    await page.fill("#backfill-to", end)
    await page.click("#backfill-dry-run")
    await expect(page.locator("[role=status]")).to_have_text(
        "Dry run: 3 of 3 slots would get a run; 0 have one."
    )
    async with server.client() as api:
        assert (await api.get(f"/v1/jobs/{job['id']}/backfills")).json()["items"] == []

    await page.click("#backfill-start")
    done = page.locator("#backfills tr[data-state=done]")
    await expect(done).to_contain_text("3/3 slots")
    await expect(page.locator("#runs tr[data-state=SUCCESS]")).to_have_count(3)
    await expect(page.locator("#runs")).to_contain_text("backfill")
    await screenshot(page, "job-backfill")
    assert errors == []
    await context.close()


async def test_a_running_backfill_is_cancelled_from_the_job_page(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """A paused job's backfill waits, running: its row has a Cancel button which, confirmed,
    ends it cancelled (and the button goes); the job page also says what a one-time job does
    after success."""
    server = server_factory()
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    async with server.client() as api:
        body = _job(sink, "hourly") | {"schedule": "0 * * * *", "timezone": "UTC"}
        job = (await api.post("/v1/jobs", json=body)).json()
        assert (await api.post(f"/v1/jobs/{job['id']}/pause", json={})).status_code == 200
        range_ = {
            "from": (hour - timedelta(hours=3)).isoformat(),
            "to": (hour - timedelta(minutes=1)).isoformat(),
        }
        backfill = (await api.post(f"/v1/jobs/{job['id']}/backfills", json=range_)).json()
        once = _job(sink, "once") | {
            "schedule": f"@at {(hour + timedelta(days=1)).isoformat()}",
            "delete_after_success": True,
        }
        one_time = (await api.post("/v1/jobs", json=once)).json()
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#whoami")).to_contain_text("every team")
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    running = page.locator(f"#backfills tr[data-backfill='{backfill['id']}'][data-state=running]")
    await expect(running).to_contain_text("0/3 slots")

    await running.locator("[data-cancel-backfill]").click()
    await expect(page.locator("#confirm-text")).to_contain_text("Cancel this backfill?")
    await page.click("#confirm-ok")
    cancelled = page.locator(f"#backfills tr[data-backfill='{backfill['id']}'][data-state=cancelled]")
    await expect(cancelled).to_be_visible()
    await expect(cancelled.locator("[data-cancel-backfill]")).to_have_count(0)
    await expect(page.locator("[role=status]")).to_contain_text("Backfill cancelled: 0 runs created")
    async with server.client() as api:
        stored = (await api.get(f"/v1/jobs/{job['id']}/backfills/{backfill['id']}")).json()
    assert stored["state"] == "cancelled"

    await page.goto(f"{server.url}/ui/#/jobs/{one_time['id']}")
    await expect(page.locator("#delete-after-success")).to_contain_text(
        "its one run's success deletes the job"
    )
    assert errors == []
    await context.close()


async def test_the_job_page_lists_its_calendars_and_marks_the_skipped_fires(
    server_factory: Callable[..., ServerProcess], sink: Sink, browser: Browser
) -> None:
    """A job whose calendar closes every day: its page names the calendar, and each upcoming fire
    says it will be skipped, and by what."""
    server = server_factory()
    every_day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    async with server.client() as api:
        made = await api.post("/v1/teams/data/calendars", json={"name": "closed", "weekdays": every_day})
        assert made.status_code == 201, made.text
        created = await api.post(
            "/v1/jobs", json=_job(sink, "daily") | {"schedule": "0 9 * * *", "calendars": ["closed"]}
        )
        job = created.json()
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#whoami")).to_contain_text("every team")
    await page.goto(f"{server.url}/ui/#/jobs/{job['id']}")
    await expect(page.locator("#job-calendars")).to_have_text("closed")
    await expect(page.locator("#upcoming li.skipped")).to_have_count(8)
    await expect(page.locator("#upcoming")).to_contain_text("skipped: calendar closed")
    assert errors == []
    await context.close()
