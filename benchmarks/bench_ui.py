"""The dashboard's page load times over many jobs in PostgreSQL (issue #12: "page load times at 100k
jobs").

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
  history (empty here) are drawn.

    .venv/bin/python benchmarks/bench_ui.py                 # 100,000 jobs (about a minute to load)
    .venv/bin/python benchmarks/bench_ui.py --jobs 1000000
    .venv/bin/python benchmarks/bench_ui.py --smoke         # 2,000 jobs, 2 repeats
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from playwright.async_api import Page, async_playwright

from bench_million import api_server, bulk_load, fresh_database
from benchlib import machine

CHROMIUM = os.environ.get("CRONWHEEL_CHROMIUM", "/usr/bin/chromium")


@dataclass
class Timing:
    page: str
    repeats: int
    rows: int  # rows drawn in the last repeat
    p50_ms: float
    max_ms: float


def timing(page: str, samples: list[float], rows: int) -> Timing:
    return Timing(page, len(samples), rows, round(statistics.median(samples), 1), round(max(samples), 1))


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
            ("jobs, first page", "#/jobs"),
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
            await page.wait_for_selector("#runs tbody tr")
            samples.append((time.perf_counter() - began) * 1000)
        results.append(timing("job (definition, preview, runs)", samples, 1))
        await browser.close()
        return results


def run(jobs: int, repeat: int) -> dict[str, Any]:
    anchor = datetime.now(UTC).replace(second=0, microsecond=0)
    results: dict[str, Any] = {"machine": machine(), "jobs": jobs}
    with fresh_database() as url:
        results["load"] = asdict(asyncio.run(bulk_load(url, jobs, anchor)))
        with api_server(url) as (base, tokens):
            results["pages"] = [asdict(t) for t in asyncio.run(measure(base, tokens["admin"], repeat))]
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"{results['jobs']} jobs (PostgreSQL), Chromium headless",
        "",
        "page | repeats | rows | p50 ms | max ms",
    ]
    lines.append("--- | --- | --- | --- | ---")
    for row in results["pages"]:
        lines.append(" | ".join(str(row[k]) for k in ("page", "repeats", "rows", "p50_ms", "max_ms")))
    lines.append(f"1-minute load average at the start: {results['machine']['loadavg'][0]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="2,000 jobs, 2 repeats")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    jobs, repeat = (2_000, 2) if args.smoke else (args.jobs, args.repeat)
    results = run(jobs, repeat)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
