"""``GET /v1/runs/{run_id}/output``: each attempt's kept output, beyond the 1 KiB excerpt of the
run's details; walled as the run is (tests/api/test_authorization_matrix.py)."""

from __future__ import annotations

from datetime import timedelta

import httpx

from cronwheel.model import AttemptResult, Outcome

from .conftest import Env, job_body

LONG = "".join(f"line {i}\n" for i in range(2000))  # 17,890 bytes


async def _attempt(env: Env, run_id: str, number: int, result: AttemptResult, *, retry: bool) -> None:
    now = env.clock.now()
    assert await env.store.claim_run(run_id, "worker-1", now, now + timedelta(seconds=30)) is not None
    await env.store.finish_attempt(run_id, number, "worker-1", result, now, now if retry else None)


async def test_each_attempts_longer_output_is_readable(client: httpx.AsyncClient, env: Env) -> None:
    job = (await client.post("/v1/jobs", json=job_body("out"))).json()
    run = (await client.post(f"/v1/jobs/{job['id']}/trigger")).json()
    failed = AttemptResult(Outcome.FAILURE, exit_code=1, output=LONG[-1024:], output_tail=LONG)
    await _attempt(env, run["id"], 1, failed, retry=True)
    await _attempt(env, run["id"], 2, AttemptResult(Outcome.SUCCESS, exit_code=0, output="ok\n"), retry=False)

    response = await client.get(f"/v1/runs/{run['id']}/output")

    assert response.status_code == 200
    assert response.json() == {
        "run_id": run["id"],
        "attempts": [
            {"number": 1, "outcome": "failure", "output": LONG, "kept": "longer"},
            {"number": 2, "outcome": "success", "output": "ok\n", "kept": "whole"},
        ],
    }
    detail = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert detail["attempt_details"][0]["output"] == LONG[-1024:]  # the details keep the excerpt


async def test_a_run_without_attempts_and_an_unknown_run(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=job_body("none"))).json()
    run = (await client.post(f"/v1/jobs/{job['id']}/trigger")).json()
    assert (await client.get(f"/v1/runs/{run['id']}/output")).json() == {"run_id": run["id"], "attempts": []}
    missing = await client.get("/v1/runs/nope/output")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
