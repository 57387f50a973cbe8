"""`cronwheel server` as a user runs it: a subprocess over a SQLite file, jobs over the REST API,
deliveries observed at a local HTTP sink, run records read back over the API."""

from __future__ import annotations

import asyncio
import calendar
import itertools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_harness import ServerProcess, Sink, wait_for

pytestmark = pytest.mark.integration


def http_job(name: str, url: str, schedule: str = "* * * * * *", **extra: Any) -> dict[str, Any]:
    return {"team": "it", "name": name, "schedule": schedule, "target": {"type": "http", "url": url}, **extra}


async def create(api: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await api.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


async def runs_of(api: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/jobs/{job_id}/runs", params={"limit": 500})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_fires_on_time_with_the_webhook_contract(api: httpx.AsyncClient, sink: Sink) -> None:
    job = await create(api, http_job("tick", sink.answer("/tick", (200, 0)), payload={"hello": "world"}))
    await wait_for(lambda: len(sink.at("/tick")) >= 3, timeout=8)
    first = sink.at("/tick")[0]
    headers = {key.lower(): value for key, value in first.headers.items()}
    assert headers["x-cronwheel-job-id"] == job["id"]
    assert headers["idempotency-key"] == headers["webhook-id"]
    assert headers["x-cronwheel-attempt"] == "1"
    assert headers["x-cronwheel-scheduled-at"].endswith("Z")
    assert first.body == {"hello": "world"}
    slot = datetime.fromisoformat(headers["x-cronwheel-scheduled-at"].replace("Z", "+00:00"))
    assert 0 <= first.at - slot.timestamp() < 0.5  # delivered well within a second of its slot
    runs = await wait_for(lambda: _finished(api, job["id"], 3), timeout=5)
    ids = [run["id"] for run in runs]
    assert len(set(ids)) == len(ids)
    slots = [run["slot"] for run in runs]
    assert len(set(slots)) == len(slots)  # one run per slot
    for run in runs[:3]:
        assert run["state"] == "SUCCESS"
        assert run["queued_lateness_s"] < 0.5
        assert run["start_lateness_s"] < 0.5
    detail = (await api.get(f"/v1/runs/{runs[0]['id']}")).json()
    assert detail["attempt_details"][0]["status_code"] == 200
    assert detail["attempt_details"][0]["output"] == "answer 200"
    assert [event["state"] for event in detail["events"]] == ["PENDING", "RUNNING", "SUCCESS"]


async def _finished(api: httpx.AsyncClient, job_id: str, count: int) -> list[dict[str, Any]] | None:
    done = [run for run in await runs_of(api, job_id) if run["state"] in ("SUCCESS", "FAILED", "SKIPPED")]
    return done if len(done) >= count else None


async def test_job_created_to_fire_two_seconds_from_now_fires_on_time(
    api: httpx.AsyncClient, sink: Sink
) -> None:
    soon = time.gmtime(time.time() + 2)
    schedule = f"{soon.tm_sec} {soon.tm_min} {soon.tm_hour} * * *"
    await create(api, http_job("soon", sink.answer("/soon", (200, 0)), schedule=schedule))
    delivery = (await wait_for(lambda: sink.at("/soon"), timeout=6))[0]
    scheduled = calendar.timegm(soon)
    assert 0 <= delivery.at - scheduled < 0.5


async def test_pause_resume_trigger_delete(api: httpx.AsyncClient, sink: Sink) -> None:
    job = await create(api, http_job("ops", sink.answer("/ops", (200, 0))))
    await wait_for(lambda: sink.at("/ops"), timeout=5)
    paused = await api.post(f"/v1/jobs/{job['id']}/pause", json={"note": "maintenance"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["pause_note"] == "maintenance"
    count = len(sink.at("/ops"))
    await asyncio.sleep(2.5)
    assert len(sink.at("/ops")) <= count + 1  # at most one already in flight when paused
    count = len(sink.at("/ops"))
    resumed = await api.post(f"/v1/jobs/{job['id']}/resume", json={})
    assert resumed.status_code == 200, resumed.text
    await wait_for(lambda: len(sink.at("/ops")) > count, timeout=4)
    skipped = [run for run in await runs_of(api, job["id"]) if run["state"] == "SKIPPED"]
    assert skipped
    assert all(run["reason"] == "paused" for run in skipped)

    key = {"Idempotency-Key": "deploy-42"}
    first = await api.post(f"/v1/jobs/{job['id']}/trigger", json={"payload": {"manual": True}}, headers=key)
    again = await api.post(f"/v1/jobs/{job['id']}/trigger", json={"payload": {"manual": True}}, headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    manual = await wait_for(lambda: [d for d in sink.at("/ops") if d.body == {"manual": True}], timeout=3)
    assert len(manual) == 1

    assert (await api.delete(f"/v1/jobs/{job['id']}")).status_code == 204
    count = len(sink.at("/ops"))
    await asyncio.sleep(2)
    assert len(sink.at("/ops")) <= count + 1
    assert (await api.get(f"/v1/jobs/{job['id']}")).status_code == 404
    assert (await api.get(f"/v1/runs/{first.json()['id']}")).status_code == 200  # history kept


async def test_retries_with_backoff_then_success(api: httpx.AsyncClient, sink: Sink) -> None:
    url = sink.answer("/flaky", (500, 0), (503, 0), (200, 0))
    retry = {"max_attempts": 4, "initial_delay_s": 0.2, "multiplier": 2, "max_delay_s": 5, "jitter": False}
    job = await create(api, http_job("flaky", url, schedule="0 0 1 1 *", retry=retry))
    run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
    await wait_for(lambda: len(sink.at("/flaky")) >= 3, timeout=6)
    attempts = sink.at("/flaky")
    keys = {d.headers["Idempotency-Key"] for d in attempts}
    assert keys == {run["id"]}  # every attempt carries the same execution id
    assert [d.headers["X-Cronwheel-Attempt"] for d in attempts] == ["1", "2", "3"]
    assert attempts[1].at - attempts[0].at >= 0.18
    assert attempts[2].at - attempts[1].at >= 0.38
    done = await wait_for(lambda: _run_state(api, run["id"], "SUCCESS"), timeout=3)
    assert [a["outcome"] for a in done["attempt_details"]] == ["failure", "failure", "success"]


async def _run_state(api: httpx.AsyncClient, run_id: str, state: str) -> dict[str, Any] | None:
    run: dict[str, Any] = (await api.get(f"/v1/runs/{run_id}")).json()
    return run if run["state"] == state else None


async def test_http_timeout_then_failed(api: httpx.AsyncClient, sink: Sink) -> None:
    job = await create(
        api, http_job("slow", sink.answer("/slow", (200, 5)), schedule="0 0 1 1 *", timeout_s=0.5)
    )
    run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
    done = await wait_for(lambda: _run_state(api, run["id"], "FAILED"), timeout=5)
    assert done["attempt_details"][0]["outcome"] == "timeout"


async def test_bad_input_is_refused_whole(api: httpx.AsyncClient, sink: Sink) -> None:
    bad = http_job("bad", f"{sink.url}/x", schedule="61 * * * *")
    response = await api.post("/v1/jobs", json=bad)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "61 is out of range 0-59" in response.text
    command = {
        "team": "it",
        "name": "cmd",
        "schedule": "@daily",
        "target": {"type": "command", "argv": ["true"]},
    }
    refused = await api.post("/v1/jobs", json=command)
    assert refused.status_code == 422
    assert "disabled" in refused.text
    elsewhere = await api.post("/v1/jobs", json=http_job("elsewhere", f"{sink.url}/x", queue="reports"))
    assert elsewhere.status_code == 422
    assert "no worker serves queue 'reports'" in elsewhere.text
    assert (await api.get("/v1/jobs")).json()["items"] == []


async def test_if_match_conflict(api: httpx.AsyncClient, sink: Sink) -> None:
    job = await create(api, http_job("edit", f"{sink.url}/e", schedule="@daily"))
    stale = {"If-Match": '"1"'}
    first = await api.patch(f"/v1/jobs/{job['id']}", json={"description": "one"}, headers=stale)
    second = await api.patch(f"/v1/jobs/{job['id']}", json={"description": "two"}, headers=stale)
    assert (first.status_code, second.status_code) == (200, 412)
    assert (await api.get(f"/v1/jobs/{job['id']}")).json()["description"] == "one"


async def test_commands_with_timeout_kill_the_process_group(
    server_factory: Callable[..., ServerProcess], tmp_path: Any
) -> None:
    server = server_factory("--allow-commands")
    shared = Path(tempfile.mkdtemp(prefix="cw-it-"))  # the commands run as nobody: not in tmp_path
    shared.chmod(0o777)
    marker = shared / "ran.txt"
    async with server.client() as api:
        ok = {"type": "command", "argv": ["sh", "-c", f"echo $CRONWHEEL_ATTEMPT >> {marker}"]}
        job = await create(api, {"team": "it", "name": "cmd", "schedule": "@daily", "target": ok})
        run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
        await wait_for(lambda: _run_state(api, run["id"], "SUCCESS"), timeout=5)
        assert marker.read_text().strip() == "1"
        marker.unlink()
        shared.rmdir()
        slow = {"type": "command", "argv": ["sleep", "30"]}
        job = await create(
            api, {"team": "it", "name": "slow", "schedule": "@daily", "target": slow, "timeout_s": 0.5}
        )
        run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
        done = await wait_for(lambda: _run_state(api, run["id"], "FAILED"), timeout=8)
        assert done["attempt_details"][0]["outcome"] == "timeout"


async def test_a_root_server_runs_commands_as_nobody_under_limits_outside_its_directory(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """The review's finding: a command job could read the database holding every team's
    secrets. A server running as root (as here) runs commands as ``nobody`` by default, with the
    default limits, in ``/``; the database file is its owner's alone."""
    server = server_factory("--allow-commands", "--allow-plain-credentials")  # a credential in clear
    database = tmp_path / "cronwheel.db"
    script = f"id -u; pwd; grep 'open files' /proc/self/limits; cat {database} {database}-wal"
    async with server.client() as api:
        secret = {"type": "http", "url": "https://hooks.example.com/x", "headers": {"X-Token": "tok-9f2c"}}
        await create(api, {"team": "billing", "name": "secret", "schedule": "@daily", "target": secret})
        spy = {"type": "command", "argv": ["sh", "-c", script]}
        job = await create(api, {"team": "it", "name": "spy", "schedule": "@daily", "target": spy})
        run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
        done = await wait_for(lambda: _run_state(api, run["id"], "FAILED"), timeout=5)
    output = done["attempt_details"][0]["output"]
    lines = output.splitlines()
    assert lines[:2] == ["65534", "/"]
    assert lines[2].split()[3:5] == ["1024", "1024"]
    assert "Permission denied" in output
    assert "tok-9f2c" not in output
    assert oct(database.stat().st_mode & 0o777) == oct(0o600)


async def test_kill9_restart_loses_and_doubles_nothing(
    server_factory: Callable[..., ServerProcess], sink: Sink
) -> None:
    server = server_factory()
    url = sink.answer("/crash", (200, 3.0), (200, 0))  # the first attempt hangs for 3 s
    async with server.client() as api:
        job = await create(api, http_job("crash", url, schedule="0 0 1 1 *"))
        run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
        await wait_for(lambda: sink.at("/crash"), timeout=5)  # attempt 1 is RUNNING at the target
        ticking = await create(api, http_job("steady", sink.answer("/steady", (200, 0))))
    server.kill9()
    await asyncio.sleep(1.5)  # slots pass while the server is down
    server.start()
    async with server.client() as api:
        done = await wait_for(lambda: _run_state(api, run["id"], "SUCCESS"), timeout=10)
        assert {d.headers["Idempotency-Key"] for d in sink.at("/crash")} == {run["id"]}
        assert [a["outcome"] for a in done["attempt_details"]] == ["lost", "success"]
        before = len(sink.at("/steady"))
        await wait_for(lambda: len(sink.at("/steady")) >= before + 2, timeout=5)  # the schedule carries on
        runs = await runs_of(api, ticking["id"])
        slots = [r["slot"] for r in runs]
        assert len(slots) == len(set(slots))  # nothing doubled
        keys = [d.headers["Idempotency-Key"] for d in sink.at("/steady")]
        assert len(keys) == len(set(keys))


async def test_a_new_user_with_the_cli(server: ServerProcess, sink: Sink) -> None:
    """The README's path: create a job with the CLI, see it fire, see its runs, typing no token:
    the CLI, run where the server was started, finds the server's token file by itself."""
    env = {**os.environ, "CRONWHEEL_URL": server.url}
    url = sink.answer("/cli", (200, 0))
    args = ["--team", "me", "--name", "hello", "--schedule", "* * * * * *", "--http", url]
    created = await _cli(env, "jobs", "create", *args, "-o", "json", cwd=server.db.parent)
    job_id = json.loads(created)["id"]
    await wait_for(lambda: len(sink.at("/cli")) >= 2, timeout=6)
    listed = await wait_for(lambda: _cli_runs(env, "me/hello", server.db.parent), timeout=5)
    assert all(run["job_id"] == job_id for run in listed)
    table = await _cli(env, "runs", "list", "--job", "me/hello", cwd=server.db.parent)
    assert "SUCCESS" in table


async def _cli_runs(env: dict[str, str], job: str, cwd: Path) -> list[dict[str, Any]] | None:
    data = json.loads(await _cli(env, "runs", "list", "--job", job, "-o", "json", cwd=cwd))
    items: list[dict[str, Any]] = data if isinstance(data, list) else data["items"]
    done = [run for run in items if run["state"] == "SUCCESS"]
    return done or None


async def _cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cronwheel", *args, env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_overlap_forbid_and_replace(api: httpx.AsyncClient, sink: Sink) -> None:
    forbid = await create(api, http_job("forbid", sink.answer("/forbid", (200, 2.2)), overlap="forbid"))
    replace = await create(api, http_job("replace", sink.answer("/replace", (200, 8)), overlap="replace"))
    await asyncio.sleep(4.5)
    await api.post(f"/v1/jobs/{forbid['id']}/pause", json={})
    await api.post(f"/v1/jobs/{replace['id']}/pause", json={})
    runs = await runs_of(api, forbid["id"])
    skipped = [r for r in runs if r["state"] == "SKIPPED"]
    fired = [r for r in runs if r["state"] != "SKIPPED"]
    assert skipped
    assert {r["reason"] for r in skipped} == {"overlap"}
    assert 1 <= len(fired) <= 3
    arrivals = sorted(d.at for d in sink.at("/forbid"))
    assert all(b - a >= 2.0 for a, b in itertools.pairwise(arrivals))  # never two at once
    replaced = await wait_for(lambda: _cancelled(api, replace["id"]), timeout=5)
    assert replaced["attempt_details"][0]["outcome"] == "cancelled"


async def _cancelled(api: httpx.AsyncClient, job_id: str) -> dict[str, Any] | None:
    for run in await runs_of(api, job_id):
        if run["state"] == "FAILED":
            detail: dict[str, Any] = (await api.get(f"/v1/runs/{run['id']}")).json()
            return detail
    return None


@pytest.mark.parametrize(
    ("misfire", "check"),
    [
        ({"policy": "skip", "grace_s": 0.5}, "skip"),
        ({"policy": "run_once"}, "run_once"),
        ({"policy": "catch_up", "max_catch_up": 2}, "catch_up"),
    ],
)
async def test_misfire_policies_after_downtime(
    server_factory: Callable[..., ServerProcess], sink: Sink, misfire: dict[str, Any], check: str
) -> None:
    server = server_factory()
    async with server.client() as api:
        job = await create(api, http_job("down", sink.answer("/down", (200, 0)), misfire=misfire))
        await wait_for(lambda: sink.at("/down"), timeout=5)
    server.kill9()
    down_from = time.time()
    await asyncio.sleep(4)
    restart = time.time()
    server.start()
    async with server.client() as api:
        await asyncio.sleep(1.5)
        runs = await runs_of(api, job["id"])
    missed = [r for r in runs if down_from + 1 < _ts(r["slot"]) < restart - 1]  # surely missed slots
    assert len(missed) >= 2
    fired = [r for r in missed if r["state"] != "SKIPPED"]
    skipped = [r for r in missed if r["state"] == "SKIPPED"]
    assert {r["reason"] for r in skipped} == {"misfire"}
    if check == "skip":
        assert fired == []  # all beyond the grace period
    elif check == "run_once":
        assert len(fired) <= 1  # only the newest slot of the whole backlog may run
        assert len(skipped) >= len(missed) - 1
    else:
        assert len(fired) <= 2  # catch_up fires at most max_catch_up of the backlog
        assert len(skipped) >= len(missed) - 2
    slots = [r["slot"] for r in runs]
    assert len(slots) == len(set(slots))


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def test_metrics_export_fire_lateness(api: httpx.AsyncClient, sink: Sink) -> None:
    await create(api, http_job("metered", sink.answer("/metered", (200, 0))))
    await wait_for(lambda: len(sink.at("/metered")) >= 2, timeout=5)
    text = (await api.get("/metrics")).text
    count = re.search(r"^cronwheel_fire_lateness_seconds_count (\S+)$", text, re.MULTILINE)
    assert count is not None
    assert float(count.group(1)) >= 2
    under_100ms = re.search(r'^cronwheel_fire_lateness_seconds_bucket\{le="0.1"\} (\S+)$', text, re.MULTILINE)
    assert under_100ms is not None
    assert float(under_100ms.group(1)) >= 2
    assert 'cronwheel_attempts_total{outcome="success"}' in text


async def test_sigterm_stops_cleanly(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory()
    async with server.client() as api:
        assert (await api.get("/readyz")).status_code == 200
    assert server.stop() == 0
    assert "Traceback" not in server.log.read_text()


async def test_a_server_restarted_without_an_option_names_the_jobs_it_will_fail(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A stored command job whose worker no longer allows commands is named
    at start, with the option that would run it, instead of failing every run in silence."""
    first = server_factory("--allow-commands")
    async with first.client() as api:
        target = {"type": "command", "argv": ["true"]}
        job = await create(api, {"team": "it", "name": "nightly", "schedule": "@daily", "target": target})
        await create(api, http_job("hook", "https://example.com/hook", "@daily"))
    assert first.stop() == 0
    second = server_factory()  # the same database, without --allow-commands
    line = await wait_for(
        lambda: next((ln for ln in second.log.read_text().splitlines() if "action=refused_job " in ln), None)
    )
    assert f"job_id={job['id']}" in line
    assert "allow=--allow-commands" in line
    assert "level=warning" in line
    assert "action=refused_jobs" in second.log.read_text()  # the count, before the jobs
    assert second.log.read_text().count("action=refused_job ") == 1  # the webhook job runs here
