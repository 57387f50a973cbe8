"""The dashboard's page load times over many jobs in PostgreSQL (target: pages load fast at 100k
jobs).

A benchmark, not a test: every figure is printed, none is asserted. Method: a fresh PostgreSQL
database is loaded with ``--jobs`` jobs exactly as ``bench_million.py`` does (its realistic mix of
schedules, teams, labels, paused jobs; ``bulk_load``), the real API app (which serves ``/ui``) runs
in a child process (``bench_million.api_server``), and headless Chromium (Debian's ``chromium``,
driven by Playwright) logs in with an admin token of every team, then times, ``--repeat`` times each,
from the navigation (or click) to the page showing its data:

* **jobs, first page**: ``/ui/#/jobs`` reloaded (HTML, scripts, the session, one
  ``GET /v1/jobs?limit=50`` through the session bridge) until its 50 rows are drawn;
* **jobs, next page**: *Next* clicked until the next 50 rows replace them (cursor paging), ten pages
  deep;
* **jobs, by label** / **paused**: the filtered list (a rare ``app`` label; paused only);
* **job**: a job's page until its definition, upcoming fire times (the schedule preview) and run
  history are drawn;
* **runs**: ``/ui/#/runs`` reloaded until its rows are drawn, unfiltered and with each filter
  (state, team, a range of slots, late, a skip reason).
* **upcoming**: ``#/upcoming`` (the next hour per second) reloaded until its busiest buckets are
  drawn, and the day view (per minute).

Every job gets ``--runs-per-job`` runs (one a minute back from the load's start; 5 % of the jobs
failing at their latest run), loaded in the database by one ``INSERT ... SELECT``, and 1 % of the
active jobs are made late (their unfired slot 10 minutes back), so that the list's sparklines
(``include=recent``), its *failing* and *late* filters, and the cluster's fire-lateness read have
history to read. Beside the browser, the list route and the store's reads are timed alone
(``--api-repeat`` requests each): ``GET /v1/jobs?limit=50`` without and with ``include=recent``,
with ``late=true`` and with ``last_state=FAILED``, ``GET /v1/schedules/upcoming`` (an hour per
second and a day per minute; an admin of every team, and a token of one small team; each
*counted*, a window a second shorter every request so that each is counted anew, and *shared*, the
same window asked again as many viewers do, answered from the api's short cache), and
``fire_lateness`` (the cluster page's percentiles). p99 is nearest rank (with 10 browser repeats,
the slowest but none). ``--api-only`` times the routes and reads alone, without the browser.

    .venv/bin/python benchmarks/bench_ui.py                 # 100,000 jobs, 25 runs each
    .venv/bin/python benchmarks/bench_ui.py --jobs 1000000 --runs-per-job 3
    .venv/bin/python benchmarks/bench_ui.py --smoke         # 2,000 jobs, 2 repeats
    .venv/bin/python benchmarks/bench_ui.py --runs-per-job 1 --api-only   # no browser
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from playwright.async_api import Page, async_playwright
from sqlalchemy import select, text

from bench_million import api_server, bulk_load, fresh_database
from benchlib import machine
from cronwheel.lateness import LATENESS_SAMPLE, LATENESS_WINDOW
from cronwheel.store import JobQuery
from cronwheel.store.schema import JOB_LIVE, jobs, to_micros
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.store.sql.jobs import _matching
from cronwheel.store.sql.runs import _recent_statement

CHROMIUM = os.environ.get("CRONWHEEL_CHROMIUM", "/usr/bin/chromium")


@dataclass
class Timing:
    page: str
    repeats: int
    rows: int  # rows drawn (or answered) in the last repeat
    p50_ms: float
    p99_ms: float
    max_ms: float


def timing(page: str, samples: list[float], rows: int) -> Timing:
    ordered = sorted(samples)
    p99 = ordered[max(math.ceil(0.99 * len(ordered)), 1) - 1]
    return Timing(
        page, len(samples), rows, round(statistics.median(samples), 1), round(p99, 1), round(max(samples), 1)
    )


# One a minute back from the anchor; 5 % of the jobs failed their two latest; fire lateness up to
# 0.5 s, durations up to 3 s (both from a hash of the run: the same on every load).
_RUNS = """
INSERT INTO runs (id, job_id, kind, slot, dedup_key, state, queue, job_version, has_payload, attempts,
                  lost_attempts, created_at, queued_at, started_at, finished_at, cancel_requested)
SELECT md5(j.id || ':' || g), j.id, 'scheduled', s.slot, 'slot:' || (s.slot / 1000000),
       CASE WHEN abs(hashtext(j.id)) % 20 = 0 AND g <= 2 THEN 'FAILED' ELSE 'SUCCESS' END,
       j.queue, 1, false, 1, 0, s.slot, s.slot + s.late, s.slot + s.late + 10000,
       s.slot + s.late + 10000 + abs(hashtext(j.id || '/' || g)) % 3000000, false
FROM jobs j
CROSS JOIN generate_series(1, $2::int) AS g
CROSS JOIN LATERAL (SELECT $1::bigint - g::bigint * 60000000 AS slot,
                           abs(hashtext(j.id || ':' || g)) % 500000 AS late) AS s
"""
# Each job's latest run, as the store's writes keep it in job_last_run (store.sql.last_runs).
_LAST = """
INSERT INTO job_last_run (job_id, team, slot, run_id, state)
SELECT DISTINCT ON (runs.job_id) runs.job_id, jobs.team, runs.slot, runs.id, runs.state
FROM runs JOIN jobs ON jobs.id = runs.job_id ORDER BY runs.job_id, runs.slot DESC, runs.id DESC
"""
_LATE = """
UPDATE jobs SET next_run_at = $1::bigint
WHERE NOT paused AND deleted_at IS NULL AND abs(hashtext(id)) % 100 = 0
"""


async def load_history(url: str, per_job: int, anchor: datetime) -> dict[str, Any]:
    """``per_job`` runs for every job, and 1 % of the active jobs late (see the module's doc)."""
    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        began = time.perf_counter()
        await connection.execute(_RUNS, to_micros(anchor), per_job)
        await connection.execute(_LAST)
        runs_s = time.perf_counter() - began
        late = await connection.execute(_LATE, to_micros(anchor - timedelta(minutes=10)))
        await connection.execute("ANALYZE runs; ANALYZE jobs; ANALYZE job_last_run")
        count = await connection.fetchval("SELECT count(*) FROM runs")
    finally:
        await connection.close()
    return {"runs": count, "runs_load_s": round(time.perf_counter() - began, 1),
            "runs_insert_s": round(runs_s, 1), "late_jobs": int(late.split()[-1])}  # fmt: skip


async def measure_api(base: str, tokens: dict[str, str], repeat: int) -> list[Timing]:
    """The list route alone, as the page calls it (through the API, not the bridge)."""
    results = await measure_upcoming(base, tokens, repeat)
    token = tokens["admin"]
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        lists: tuple[tuple[str, dict[str, str | int]], ...] = (
            ("GET /v1/jobs?limit=50", {"limit": 50}),
            ("GET /v1/jobs?limit=50&include=recent", {"limit": 50, "include": "recent"}),
            ("  ... &late=true", {"limit": 50, "include": "recent", "late": "true"}),
            ("  ... &last_state=FAILED", {"limit": 50, "include": "recent", "last_state": "FAILED"}),
        )
        for name, params in lists:
            samples, rows = [], 0
            for _ in range(repeat):
                began = time.perf_counter()
                answer = await http.get("/v1/jobs", params=params)
                samples.append((time.perf_counter() - began) * 1000)
                answer.raise_for_status()
                rows = len(answer.json()["items"])
            results.append(timing(name, samples, rows))
    return results


async def measure_upcoming(base: str, tokens: dict[str, str], repeat: int) -> list[Timing]:
    """The upcoming fires' route, as the page calls it; its rows are the buckets that hold a fire."""
    results = []
    views = (
        ("hour per second", {"window": 3600, "bucket": 1}),
        ("day per minute", {"window": 86400, "bucket": 60}),
    )
    for who in ("admin", "legal"):
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {tokens[who]}"}, timeout=60
        ) as http:
            for name, params in views:
                for kind, shorter in (("counted", 1), ("shared", 0)):
                    samples, rows = [], 0
                    for n in range(repeat):
                        # counted: a window a second shorter each time, so that no answer is the
                        # api's cached one; shared: the same window, as many viewers ask it
                        asked = {**params, "window": params["window"] - n * shorter}
                        began = time.perf_counter()
                        answer = await http.get("/v1/schedules/upcoming", params=asked)
                        samples.append((time.perf_counter() - began) * 1000)
                        answer.raise_for_status()
                        rows = len(answer.json()["buckets"])
                    label = f"GET /v1/schedules/upcoming, {name}, {kind} ({who})"
                    results.append(timing(label, samples, rows))
    return results


async def measure_store(url: str, anchor: datetime, repeat: int) -> tuple[list[Timing], dict[str, list[str]]]:
    """The cluster page's fire-lateness read, in this process; and PostgreSQL's plans of the
    list's late page and of its recent runs (the first page's ids)."""
    store = await open_store(url)
    try:
        samples, rows = [], 0
        for _ in range(repeat):
            began = time.perf_counter()
            rows = len(await store.fire_lateness(anchor - LATENESS_WINDOW, LATENESS_SAMPLE))
            samples.append((time.perf_counter() - began) * 1000)
        plans = await _plans(store)
    finally:
        await store.close()
    return [timing("store.fire_lateness (5 min, at most 10,000 runs)", samples, rows)], plans


async def _plans(store: SqlStore) -> dict[str, list[str]]:
    late = select(jobs).where(JOB_LIVE, *_matching(JobQuery(late_before=datetime.now(UTC)), None))
    late = late.order_by(jobs.c.id).limit(51)
    async with store.engine.connect() as connection:
        ids = list((await connection.scalars(select(jobs.c.id).order_by(jobs.c.id).limit(50))).all())
        plans = {}
        for name, statement in (("late page", late), ("recent runs", _recent_statement(connection, ids, 20))):
            sql = str(statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
            rows = await connection.execute(text("EXPLAIN (ANALYZE, COSTS OFF) " + sql))
            plans[name] = [str(row[0]) for row in rows]
    return plans


async def _rows(page: Page) -> int:
    return await page.locator("#jobs tr[data-job]").count()


async def _first_ids(page: Page) -> str:
    return await page.locator("#jobs tr[data-job]").first.get_attribute("data-job") or ""


async def measure(base: str, token: str, repeat: int) -> list[Timing]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM)
        page = await browser.new_page()
        page.set_default_timeout(60_000)
        await page.goto(f"{base}/ui")
        await page.fill("#token", token)
        await page.click("#login-button")
        await page.wait_for_selector("#jobs tr[data-job]")
        results = []
        for name, hash_ in (
            ("jobs, first page (with sparklines)", "#/jobs"),
            ("jobs, late only", "#/jobs?late=true"),
            ("jobs, failing (last run FAILED)", "#/jobs?last_state=FAILED"),
            ("jobs, by a rare label", "#/jobs?label=app=app-new-3"),
            ("jobs, paused", "#/jobs?paused=true"),
        ):
            samples = []
            for _ in range(repeat):
                await page.goto(f"{base}/ui/{hash_}")
                began = time.perf_counter()
                await page.reload()  # a cold page: HTML, scripts, session, the list
                await page.wait_for_selector("#jobs tr[data-job], #jobs td.muted")
                samples.append((time.perf_counter() - began) * 1000)
            results.append(timing(name, samples, await _rows(page)))
        await page.goto(f"{base}/ui/#/jobs")
        await page.reload()
        await page.wait_for_selector("#jobs tr[data-job]")
        samples = []
        for _ in range(max(repeat, 10)):
            before = await _first_ids(page)
            began = time.perf_counter()
            await page.click("#next")
            await page.wait_for_function(
                "(before) => { const r = document.querySelector('#jobs tr[data-job]');"
                " return r && r.dataset.job !== before; }",
                arg=before,
            )
            samples.append((time.perf_counter() - began) * 1000)
        results.append(timing("jobs, next page (cursor)", samples, await _rows(page)))
        job_id = await _first_ids(page)
        samples = []
        for _ in range(repeat):
            await page.goto(f"{base}/ui/#/jobs/{job_id}")
            began = time.perf_counter()
            await page.reload()
            await page.wait_for_selector("#upcoming li")
            await page.wait_for_selector("#runs tbody tr[data-run]")
            samples.append((time.perf_counter() - began) * 1000)
        results.append(timing("job (definition, preview, runs)", samples, 1))
        results += await _runs_pages(page, base, repeat)
        for name, hash_ in (
            ("upcoming, next hour per second", "#/upcoming"),
            ("upcoming, next day per minute", "#/upcoming?span=day"),
        ):
            samples = []
            for _ in range(repeat):
                await page.goto(f"{base}/ui/{hash_}")
                began = time.perf_counter()
                await page.reload()
                await page.wait_for_selector("#busiest tr[data-bucket]")
                samples.append((time.perf_counter() - began) * 1000)
            results.append(timing(name, samples, await page.locator("#herd g[data-bucket]").count()))
        await browser.close()
        return results


async def _runs_pages(page: Page, base: str, repeat: int) -> list[Timing]:
    """The runs page (``GET /v1/runs`` through the bridge), unfiltered and with each filter; the
    loaded runs are SUCCESS or FAILED, none skipped, so a reason finds none (the worst case: the
    whole slot index walked)."""
    results = []
    since = (datetime.now(UTC) - timedelta(minutes=30)).isoformat(timespec="seconds").replace("+00:00", "Z")
    for name, hash_ in (
        ("runs, first page", "#/runs"),
        ("runs, failed", "#/runs?state=FAILED"),
        ("runs, the smallest team", "#/runs?team=legal"),
        ("runs, last 30 min of slots", f"#/runs?since={since}"),
        ("runs, started late", "#/runs?late=true"),
        ("runs, skipped for a misfire (none)", "#/runs?reason=misfire"),
    ):
        samples = []
        for _ in range(repeat):
            await page.goto(f"{base}/ui/{hash_}")
            began = time.perf_counter()
            await page.reload()
            await page.wait_for_selector("#run-list tr[data-run], #run-list td.muted")
            samples.append((time.perf_counter() - began) * 1000)
        results.append(timing(name, samples, await page.locator("#run-list tr[data-run]").count()))
    return results


def run(jobs: int, repeat: int, per_job: int, api_repeat: int, browser: bool = True) -> dict[str, Any]:
    anchor = datetime.now(UTC).replace(second=0, microsecond=0)
    results: dict[str, Any] = {"machine": machine(), "jobs": jobs}
    with fresh_database() as url:
        results["load"] = asdict(asyncio.run(bulk_load(url, jobs, anchor)))
        print(f"  jobs loaded: {results['load']}", flush=True)
        results["history"] = asyncio.run(load_history(url, per_job, anchor))
        print(f"  history loaded: {results['history']}", flush=True)
        with api_server(url) as (base, tokens):
            pages = asyncio.run(measure(base, tokens["admin"], repeat)) if browser else []
            results["pages"] = [asdict(t) for t in pages]
            results["api"] = [asdict(t) for t in asyncio.run(measure_api(base, tokens, api_repeat))]
        timings, results["plans"] = asyncio.run(measure_store(url, anchor, api_repeat))
        results["api"] += [asdict(t) for t in timings]
    return results


def report(results: dict[str, Any]) -> str:
    history = results["history"]
    lines = [
        f"{results['jobs']} jobs, {history['runs']} runs (PostgreSQL), {history['late_jobs']} late jobs;"
        f" jobs loaded in {results['load']['total_s']} s, runs in {history['runs_load_s']} s",
        "",
        "page or read | repeats | rows | p50 ms | p99 ms | max ms",
        "--- | --- | --- | --- | --- | ---",
    ]
    keys = ("page", "repeats", "rows", "p50_ms", "p99_ms", "max_ms")
    for row in results["pages"] + results["api"]:
        lines.append(" | ".join(str(row[k]) for k in keys))
    lines.append(f"1-minute load average at the start: {results['machine']['loadavg'][0]}")
    for name, plan in results["plans"].items():
        lines += ["", f"PostgreSQL's plan of the {name}:", *(f"    {line}" for line in plan)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--runs-per-job", type=int, default=25)
    parser.add_argument("--api-repeat", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="2,000 jobs, 2 repeats")
    parser.add_argument("--api-only", action="store_true", help="the routes and reads alone, no browser")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    jobs, repeat, api_repeat = (2_000, 2, 5) if args.smoke else (args.jobs, args.repeat, args.api_repeat)
    results = run(jobs, repeat, args.runs_per_job, api_repeat, browser=not args.api_only)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
