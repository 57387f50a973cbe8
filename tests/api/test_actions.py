"""Pause, resume, trigger (with Idempotency-Key), and reading runs with attempts and events."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx

from cronwheel.model import AttemptResult, LiveOutput, Outcome

from .conftest import Env, job_body


async def create(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job_body(**changes))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_pause_with_note_then_resume(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    paused = await client.post(f"/v1/jobs/{job['id']}/pause", json={"note": "db migration"})
    assert paused.status_code == 200
    assert paused.headers["etag"] == '"2"'
    assert paused.json()["paused"] is True
    assert paused.json()["pause_note"] == "db migration"
    assert paused.json()["paused_at"] == "2026-03-02T12:00:00Z"
    again = await client.post(f"/v1/jobs/{job['id']}/pause")  # no body: already paused, unchanged
    assert again.json()["version"] == 2
    resumed = await client.post(f"/v1/jobs/{job['id']}/resume", json={})
    assert resumed.status_code == 200
    assert resumed.json()["paused"] is False
    assert resumed.json()["pause_note"] is None


async def test_resume_skip_records_missed_slots(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client, schedule="0 * * * *", timezone="UTC")
    assert job["next_run_at"] == "2026-03-02T13:00:00Z"
    await client.post(f"/v1/jobs/{job['id']}/pause")
    env.clock.advance(3 * 3600 + 60)  # 15:01: the 13:00, 14:00 and 15:00 slots passed
    resumed = (await client.post(f"/v1/jobs/{job['id']}/resume", json={"missed": "skip"})).json()
    assert resumed["next_run_at"] == "2026-03-02T16:00:00Z"
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [(run["slot"], run["state"], run["reason"]) for run in runs] == [
        ("2026-03-02T15:00:00Z", "SKIPPED", "paused"),
        ("2026-03-02T14:00:00Z", "SKIPPED", "paused"),
        ("2026-03-02T13:00:00Z", "SKIPPED", "paused"),
    ]
    skipped = (await client.get(f"/v1/jobs/{job['id']}/runs", params={"state": "SKIPPED", "limit": 2})).json()
    assert len(skipped["items"]) == 2
    assert skipped["next_cursor"] is not None


async def test_resume_misfire_leaves_the_cursor(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client, schedule="0 * * * *", timezone="UTC")
    await client.post(f"/v1/jobs/{job['id']}/pause")
    env.clock.advance(3 * 3600)
    resumed = (await client.post(f"/v1/jobs/{job['id']}/resume", json={"missed": "misfire"})).json()
    assert resumed["next_run_at"] == "2026-03-02T13:00:00Z"  # the scheduler's misfire policy decides
    assert (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"] == []


async def test_trigger_is_idempotent_by_key(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    url = f"/v1/jobs/{job['id']}/trigger"
    first = await client.post(
        url, json={"payload": {"reason": "backfill"}}, headers={"Idempotency-Key": "k-1"}
    )
    assert first.status_code == 201
    run = first.json()
    assert first.headers["location"] == f"/v1/runs/{run['id']}"
    assert run["kind"] == "manual"
    assert run["state"] == "PENDING"
    assert run["slot"] == "2026-03-02T12:00:00Z"
    assert run["payload"] == {"reason": "backfill"}
    assert run["idempotency_key"] == "k-1"
    assert run["queued_at"] == "2026-03-02T12:00:00Z"
    assert run["queued_lateness_s"] == 0.0
    env.clock.advance(5)
    retry = await client.post(
        url, json={"payload": {"reason": "backfill"}}, headers={"Idempotency-Key": "k-1"}
    )
    assert retry.status_code == 200
    assert retry.json()["id"] == run["id"]
    other = await client.post(url, headers={"Idempotency-Key": "k-2"})
    assert other.status_code == 201
    assert other.json()["id"] != run["id"]
    assert other.json()["payload"] is None
    assert other.json()["has_payload"] is False
    no_key = [await client.post(url) for _ in range(2)]
    assert [r.status_code for r in no_key] == [201, 201]
    assert [t.run_id for t in env.queue.published] == [run["id"], other.json()["id"]] + [
        r.json()["id"] for r in no_key
    ]
    listed = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert len(listed) == 4
    last = (await client.get(f"/v1/jobs/{job['id']}")).json()["last_run"]
    assert last["state"] == "PENDING"


async def test_trigger_unknown_job_is_404(client: httpx.AsyncClient, env: Env) -> None:
    response = await client.post("/v1/jobs/missing/trigger")
    assert response.status_code == 404
    assert env.queue.published == []
    assert (await client.get("/v1/jobs/missing/runs")).status_code == 404


async def test_run_detail_with_attempts_events_and_lateness(client: httpx.AsyncClient, env: Env) -> None:
    job = await create(client)
    run = (await client.post(f"/v1/jobs/{job['id']}/trigger")).json()
    env.clock.advance(1.5)
    now = env.clock.now()
    claimed = await env.store.claim_run(run["id"], "worker-1", now, now + timedelta(seconds=30))
    assert claimed is not None
    env.clock.advance(2)
    sent = (("Host", "example.com"), ("Authorization", "[redacted]"), ("Idempotency-Key", run["id"]))
    await env.store.write_outputs([LiveOutput(run["id"], 1, "so far\n")], "worker-1", env.clock.now())
    running = (await client.get(f"/v1/runs/{run['id']}")).json()["attempt_details"][0]
    assert (running["output"], running["output_at"]) == ("so far\n", "2026-03-02T12:00:03.500000Z")
    assert running["finished_at"] is None
    answered = (("Content-Type", "text/plain"), ("Set-Cookie", "[redacted]"))
    result = AttemptResult(Outcome.SUCCESS, status_code=204, request_headers=sent, response_headers=answered)
    await env.store.finish_attempt(run["id"], 1, "worker-1", result, env.clock.now(), None)
    response = await client.get(f"/v1/runs/{run['id']}")
    assert response.status_code == 200
    detail = response.json()
    assert detail["state"] == "SUCCESS"
    assert detail["attempts"] == 1
    assert detail["start_lateness_s"] == 1.5
    assert detail["queued_lateness_s"] == 0.0
    assert detail["finished_at"] == "2026-03-02T12:00:03.500000Z"
    (attempt,) = detail["attempt_details"]
    assert attempt["number"] == 1
    assert attempt["worker"] == "worker-1"
    assert attempt["outcome"] == "success"
    assert attempt["status_code"] == 204
    assert list(attempt["request_headers"].items()) == list(sent)  # an object, in the order sent
    assert list(attempt["response_headers"].items()) == list(answered)
    assert (attempt["output"], attempt["output_at"]) == (None, None)  # the final record replaced it
    assert [(e["previous"], e["state"]) for e in detail["events"]] == [
        (None, "PENDING"),
        ("PENDING", "RUNNING"),
        ("RUNNING", "SUCCESS"),
    ]
    summary = (await client.get(f"/v1/jobs/{job['id']}")).json()["last_run"]
    assert summary == {
        "id": run["id"], "state": "SUCCESS", "slot": run["slot"], "finished_at": detail["finished_at"],
    }  # fmt: skip
    assert (await client.get("/v1/runs/nope")).status_code == 404
    all_runs = (await client.get("/v1/runs", params={"job_id": job["id"], "state": "SUCCESS"})).json()
    assert [r["id"] for r in all_runs["items"]] == [run["id"]]


async def test_runs_of_a_deleted_job_stay_readable(client: httpx.AsyncClient) -> None:
    job = await create(client)
    run = (await client.post(f"/v1/jobs/{job['id']}/trigger")).json()
    assert (await client.delete(f"/v1/jobs/{job['id']}")).status_code == 204
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert [r["id"] for r in runs] == [run["id"]]
    assert (await client.get(f"/v1/runs/{run['id']}")).status_code == 200
