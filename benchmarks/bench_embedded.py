"""Fire lateness of the embedded server, end to end (a benchmark, not a test).

Starts `cronwheel server` over a fresh SQLite file, a local HTTP sink on 127.0.0.1, creates N jobs
with a second-level schedule spread over the seconds, lets them fire for a while, then reads every
run back over the API and prints queued lateness (queued - slot) and start lateness (started -
slot) as p50 / p99 / max, plus how many deliveries reached the sink.

``--herd N`` is the top of the hour seen from a webhook: N jobs due in the same second, written
with ``cronwheel apply`` from one file (the server's API rate limit is lifted for that, nothing
else), and the arrival of each run at the sink minus the slot, p50 / p99 / max, with the runs
that arrived twice (by ``Idempotency-Key``) and those that never arrived.

    .venv/bin/python benchmarks/bench_embedded.py --jobs 200 --seconds 30
    .venv/bin/python benchmarks/bench_embedded.py --herd 3000
    .venv/bin/python benchmarks/bench_embedded.py --smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

PY_SPY = os.environ.get("CRONWHEEL_BENCH_PY_SPY") or shutil.which("py-spy") or "/tmp/tools/bin/py-spy"


async def start_sink(keys: list[str] | None = None) -> tuple[web.AppRunner, str, list[float]]:
    """A fast local webhook; ``keys``: where each delivery's ``Idempotency-Key`` goes."""
    arrivals: list[float] = []

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        arrivals.append(time.time())
        if keys is not None:
            keys.append(request.headers.get("Idempotency-Key", ""))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/hook", arrivals


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """The server, its URL, and the header of the admin token it wrote beside its database."""
    log = workdir / "server.log"
    command = [sys.executable, "-m", "cronwheel", "server", "--port", "0", "--allow-network", "127.0.0.0/8",
               "--database-url", f"sqlite:///{workdir / 'bench.db'}", "--rate-limit", "0"]  # fmt: skip
    # no rate limit: --jobs N creates and pauses N jobs as fast as the API answers; the rest is the
    # default server's (its INFO lines, one per attempt, go to server.log)
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    for _ in range(400):
        found = re.search(r"serving on (http://\S+)", log.read_text(errors="replace"))
        if found:
            token = (workdir / "bench.db.token").read_text().strip()
            return process, found.group(1), {"Authorization": f"Bearer {token}"}
        time.sleep(0.05)
    raise SystemExit(f"server did not start:\n{log.read_text()}")


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max": ordered[-1],
    }


async def collect_runs(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/v1/runs", params=params)).json()
        runs.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return runs


async def main(jobs: int, seconds: float, every: int) -> dict[str, Any]:
    runner, hook, arrivals = await start_sink()
    with tempfile.TemporaryDirectory() as tmp:
        process, url, headers = start_server(Path(tmp))
        try:
            async with httpx.AsyncClient(base_url=url, timeout=30, headers=headers) as api:
                for index in range(jobs):
                    schedule = f"{index % every}/{every} * * * * *"
                    target = {"type": "http", "url": hook}
                    body = {"team": "bench", "name": f"job-{index}", "schedule": schedule, "target": target}
                    response = await api.post("/v1/jobs", json=body)
                    response.raise_for_status()
                started = time.time()
                await asyncio.sleep(seconds)
                for page_job in (await api.get("/v1/jobs", params={"limit": 1000})).json()["items"]:
                    await api.post(f"/v1/jobs/{page_job['id']}/pause", json={})
                await asyncio.sleep(2)
                runs = [r for r in await collect_runs(api) if r["kind"] == "scheduled"]
        finally:
            process.terminate()
            process.wait(30)
            await runner.cleanup()
    queued = [r["queued_lateness_s"] for r in runs if r["queued_lateness_s"] is not None]
    begun = [r["start_lateness_s"] for r in runs if r["start_lateness_s"] is not None]
    return {
        "jobs": jobs,
        "seconds": round(time.time() - started, 1),
        "runs": len(runs),
        "states": {state: sum(r["state"] == state for r in runs) for state in {r["state"] for r in runs}},
        "deliveries": len(arrivals),
        "queued_lateness_ms": {k: round(v * 1000, 1) for k, v in percentiles(queued).items()},
        "start_lateness_ms": {k: round(v * 1000, 1) for k, v in percentiles(begun).items()},
    }


def herd_file(path: Path, jobs: int, hook: str, slot: float) -> None:
    """``jobs`` jobs due at ``slot`` (a whole second, UTC), one ``cronwheel apply`` file."""
    due = time.gmtime(slot)
    schedule = f"{due.tm_sec} {due.tm_min} {due.tm_hour} * * *"
    lines = ["team: bench", "jobs:"]
    for index in range(jobs):
        lines += [f"  - name: herd-{index}", f"    schedule: '{schedule}'",
                  "    target: {type: http, url: '" + hook + "'}"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def profile_server(pid: int, slot: float, into: Path) -> subprocess.Popen[bytes]:
    """py-spy (``record -r 200 -f raw``) of the server from now (3 s before the slot) until 5 s
    after it."""
    into.mkdir(parents=True, exist_ok=True)
    seconds = max(1, int(slot - time.time() + 5))
    command = [PY_SPY, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--nonblocking",
               "--duration", str(seconds), "--output", str(into / "server.raw")]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def herd(jobs: int, settle_s: float, profile: Path | None = None) -> dict[str, Any]:
    keys: list[str] = []
    runner, hook, arrivals = await start_sink(keys)
    with tempfile.TemporaryDirectory() as tmp:
        process, url, headers = start_server(Path(tmp))
        try:
            slot = float(int(time.time() + settle_s) + 1)
            herd_file(Path(tmp) / "herd.yaml", jobs, hook, slot)
            token = headers["Authorization"].removeprefix("Bearer ")
            env = {**os.environ, "CRONWHEEL_URL": url, "CRONWHEEL_TOKEN": token}
            applying = time.monotonic()
            command = [sys.executable, "-m", "cronwheel", "apply", "-f", str(Path(tmp) / "herd.yaml")]
            subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
            apply_s = time.monotonic() - applying
            overran = time.time() > slot
            spy = None
            if profile is not None:
                await asyncio.sleep(max(0.0, slot - 3 - time.time()))
                spy = profile_server(process.pid, slot, profile)
            await asyncio.sleep(max(0.0, slot - 1 - time.time()))
            before = (cpu_seconds(process.pid), time.process_time())
            while time.time() < slot + 60 and len(set(keys)) < jobs:
                await asyncio.sleep(0.05)
            cpu = {"server": cpu_seconds(process.pid) - before[0], "sink": time.process_time() - before[1]}
            await asyncio.sleep(1.0)  # any late doubles
            if spy is not None:
                spy.wait(60)
        finally:
            process.terminate()
            process.wait(30)
            await runner.cleanup()
        steps = run_steps(Path(tmp) / "bench.db")
    lateness = [moment - slot for moment in arrivals]
    return {
        "jobs": jobs,
        "apply_s": round(apply_s, 1),
        "setup_overran": overran,
        "arrived": len(set(keys)),
        "missing": jobs - len(set(keys)),
        "doubled": len(keys) - len(set(keys)),
        "arrival_lateness_ms": {k: round(v * 1000, 1) for k, v in percentiles(lateness).items()},
        **steps,
        # from 1 s before the slot to the last arrival: the server's CPU, and this process' (the sink's)
        "cpu_s": {name: round(seconds, 2) for name, seconds in cpu.items()},
    }


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_steps(database: Path) -> dict[str, dict[str, float]]:
    """Each run's queued, started and finished instants minus its slot, in ms (p50 / p99 / max),
    read from the server's database once it stopped: where the arrivals' lateness comes from."""
    with sqlite3.connect(database) as connection:
        rows = connection.execute("SELECT slot, queued_at, started_at, finished_at FROM runs").fetchall()
    found = {}
    for index, name in ((1, "queued"), (2, "started"), (3, "finished")):
        values = [(row[index] - row[0]) / 1e6 for row in rows if row[index] is not None]
        found[f"{name}_lateness_ms"] = {k: round(v * 1000, 1) for k, v in percentiles(values).items()}
    started = [(row[2] - row[0]) / 1e5 for row in rows if row[2] is not None]
    tenths = Counter(f"{int(tenth) / 10:+.1f}s" for tenth in started)
    found["started_per_100ms"] = dict(sorted(tenths.items()))
    return found


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--every", type=int, default=5, help="each job fires every N seconds")
    parser.add_argument("--herd", type=int, default=0, help="N jobs due in one second (a webhook's view)")
    parser.add_argument("--settle", type=float, default=None, help="--herd: seconds from start to the slot")
    parser.add_argument("--profile", type=Path, default=None,
                        help="--herd: py-spy the server, 3 s before the slot to 5 s after")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="tiny run for CI (no timing judgement)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.seconds = 5, 3.0
    if args.herd:
        # apply writes some 25-50 jobs a second
        settle = args.settle if args.settle is not None else 15.0 + args.herd / 15
        result = asyncio.run(herd(args.herd, settle, args.profile))
    else:
        result = asyncio.run(main(args.jobs, args.seconds, args.every))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
