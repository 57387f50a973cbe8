"""``@every`` and ``@at`` jobs through a real `cronwheel server`: deliveries at the sink on the
interval's multiples, one delivery for a one-time job, which is then complete over the API and
in the CLI."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import re
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from server_harness import ServerProcess, Sink, wait_for

pytestmark = pytest.mark.integration


def _job(name: str, url: str, schedule: str, **extra: Any) -> dict[str, Any]:
    return {"team": "it", "name": name, "schedule": schedule, "target": {"type": "http", "url": url}, **extra}


def _slot(headers: dict[str, str]) -> datetime:
    lowered = {key.lower(): value for key, value in headers.items()}
    return datetime.fromisoformat(lowered["x-cronwheel-scheduled-at"].replace("Z", "+00:00"))


async def test_an_interval_job_fires_on_its_multiples(api: httpx.AsyncClient, sink: Sink) -> None:
    created = await api.post("/v1/jobs", json=_job("every-2s", sink.answer("/every", (200, 0)), "@every 2s"))
    assert created.status_code == 201, created.text
    deliveries = await wait_for(lambda: len(sink.at("/every")) >= 3 and sink.at("/every"), timeout=10)
    slots = [_slot(delivery.headers) for delivery in deliveries[:3]]
    assert all(int(slot.timestamp()) % 2 == 0 for slot in slots)  # multiples of 2 s since the epoch
    assert [b - a for a, b in itertools.pairwise(slots)] == [timedelta(seconds=2)] * 2
    for delivery, slot in zip(deliveries, slots, strict=False):
        assert 0 <= delivery.at - slot.timestamp() < 0.5


async def test_a_one_time_job_fires_once_and_is_then_complete(
    server: ServerProcess, api: httpx.AsyncClient, sink: Sink
) -> None:
    soon = datetime.fromtimestamp(int(time.time()) + 2, UTC)
    body = _job("once", sink.answer("/once", (200, 0)), f"@at {soon.isoformat()}")
    created = await api.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["next_run_at"] == soon.isoformat().replace("+00:00", "Z")
    delivery = (await wait_for(lambda: sink.at("/once"), timeout=8))[0]
    assert _slot(delivery.headers) == soon
    assert 0 <= delivery.at - soon.timestamp() < 0.5
    await wait_for(lambda: _complete(api, job["id"]), timeout=5)
    await asyncio.sleep(1.5)  # a slot after the instant would have come by now
    assert len(sink.at("/once")) == 1
    runs = (await api.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [run["state"] for run in runs] == ["SUCCESS"]
    env = {**os.environ, "CRONWHEEL_URL": server.url}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cronwheel", "jobs", "get", job["id"], env=env, cwd=server.db.parent,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert re.search(r"next run:\s+complete", out.decode()), out.decode()
    assert re.search(r"dst:\s+none: elapsed time", out.decode())
    late = {**body, "name": "late", "schedule": "@at 2026-01-01T00:00:00Z"}
    refused = await api.post("/v1/jobs", json=late)
    assert refused.status_code == 422
    assert "has passed" in refused.json()["detail"]


async def _complete(api: httpx.AsyncClient, job_id: str) -> bool:
    job = (await api.get(f"/v1/jobs/{job_id}")).json()
    return (
        job["next_run_at"] is None and job["last_run"] is not None and job["last_run"]["state"] == "SUCCESS"
    )


async def test_a_jittered_interval_job_fires_each_slot_at_its_fire_time(
    api: httpx.AsyncClient, sink: Sink
) -> None:
    """``@every 2s`` with a 1.5 s window: each slot is delivered at the slot plus its offset (the
    documented hash of the job id and the slot), not at the slot, and its run records that instant."""
    body = _job("jittered", sink.answer("/jittered", (200, 0)), "@every 2s", jitter_s=1.5)
    created = await api.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job = created.json()
    deliveries = await wait_for(lambda: len(sink.at("/jittered")) >= 4 and sink.at("/jittered"), timeout=15)
    slots = [_slot(delivery.headers) for delivery in deliveries[:4]]
    assert [b - a for a, b in itertools.pairwise(slots)] == [timedelta(seconds=2)] * 3  # the slots, as ever
    offsets = [_offset_s(job["id"], slot, 1.5) for slot in slots]
    for delivery, slot, offset in zip(deliveries, slots, offsets, strict=False):
        assert 0 <= delivery.at - (slot.timestamp() + offset) < 0.5, (slot, offset, delivery.at)
    runs = (await api.get(f"/v1/jobs/{job['id']}/runs", params={"limit": 100})).json()["items"]
    due_of = {run["slot"]: run["due_at"] for run in runs}
    for slot, offset in zip(slots, offsets, strict=True):
        recorded = due_of[slot.isoformat().replace("+00:00", "Z")]
        assert datetime.fromisoformat(recorded.replace("Z", "+00:00")) == slot + timedelta(seconds=offset)


def _offset_s(job_id: str, slot: datetime, jitter_s: float) -> float:
    """The documented offset, written again here: BLAKE2b of "{job id}|{slot in Unix
    microseconds}" (8 bytes, big-endian) modulo the window in milliseconds."""
    micros = int(slot.timestamp()) * 1_000_000
    digest = hashlib.blake2b(f"{job_id}|{micros}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % int(jitter_s * 1000)) / 1000


async def _cli(server: ServerProcess, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "CRONWHEEL_URL": server.url}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cronwheel", *args, env=env, cwd=server.db.parent,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_one_time_job_deleted_after_success_is_gone_and_a_failed_one_stays(
    server: ServerProcess, api: httpx.AsyncClient, sink: Sink
) -> None:
    soon = datetime.fromtimestamp(int(time.time()) + 2, UTC)
    at = f"@at {soon.isoformat()}"
    succeeds = _job("gone", sink.answer("/gone", (200, 0)), at, delete_after_success=True)
    fails = _job("kept", sink.answer("/kept", (500, 0)), at, delete_after_success=True)
    created = [await api.post("/v1/jobs", json=body) for body in (succeeds, fails)]
    assert [response.status_code for response in created] == [201, 201], created[1].text
    gone, kept = (response.json() for response in created)

    await wait_for(lambda: sink.at("/gone") and sink.at("/kept"), timeout=8)
    await wait_for(lambda: _status(api, gone["id"], 404), timeout=5)
    code, out, err = await _cli(server, "jobs", "list")
    assert code == 0, err
    assert "kept" in out
    assert "gone" not in out
    code, out, err = await _cli(server, "jobs", "get", gone["id"])
    assert code == 2
    assert "Not found (404)" in err
    runs = (await api.get(f"/v1/jobs/{gone['id']}/runs")).json()["items"]  # its history stays
    assert [run["state"] for run in runs] == ["SUCCESS"]
    await wait_for(lambda: _last_state(api, kept["id"], "FAILED"), timeout=5)
    assert (await api.get(f"/v1/jobs/{kept['id']}")).json()["next_run_at"] is None  # complete, kept


async def _status(api: httpx.AsyncClient, job_id: str, status: int) -> bool:
    return (await api.get(f"/v1/jobs/{job_id}")).status_code == status


async def _last_state(api: httpx.AsyncClient, job_id: str, state: str) -> bool:
    last = (await api.get(f"/v1/jobs/{job_id}")).json()["last_run"]
    return last is not None and last["state"] == state
