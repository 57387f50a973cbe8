"""Runs name their job as readers know it (``job_team``, ``job_name``), from one read per page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from cronwheel.model import Job

from .conftest import Env, job_body


async def trigger(client: httpx.AsyncClient, name: str, team: str = "data") -> dict[str, Any]:
    job = await client.post("/v1/jobs", json=job_body(name, team))
    assert job.status_code == 201, job.text
    run = await client.post(f"/v1/jobs/{job.json()['id']}/trigger")
    assert run.status_code == 201, run.text
    data: dict[str, Any] = run.json()
    return data


async def test_runs_carry_their_jobs_team_and_name(client: httpx.AsyncClient) -> None:
    run = await trigger(client, "nightly")
    assert (run["job_team"], run["job_name"]) == ("data", "nightly")  # the trigger's answer
    listed = (await client.get("/v1/runs")).json()["items"]
    assert [(r["id"], r["job_team"], r["job_name"]) for r in listed] == [(run["id"], "data", "nightly")]
    of_job = (await client.get(f"/v1/jobs/{run['job_id']}/runs")).json()["items"]
    assert (of_job[0]["job_team"], of_job[0]["job_name"]) == ("data", "nightly")
    detail = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert (detail["job_team"], detail["job_name"]) == ("data", "nightly")


async def test_a_deleted_jobs_runs_say_so_with_null(client: httpx.AsyncClient) -> None:
    kept = await trigger(client, "kept")
    gone = await trigger(client, "gone", team="web")
    assert (await client.delete(f"/v1/jobs/{gone['job_id']}")).status_code == 204
    listed = {r["id"]: r for r in (await client.get("/v1/runs")).json()["items"]}
    assert (listed[kept["id"]]["job_team"], listed[kept["id"]]["job_name"]) == ("data", "kept")
    assert (listed[gone["id"]]["job_team"], listed[gone["id"]]["job_name"]) == (None, None)
    assert listed[gone["id"]]["job_id"] == gone["job_id"]
    detail = (await client.get(f"/v1/runs/{gone['id']}")).json()
    assert (detail["job_team"], detail["job_name"]) == (None, None)
    of_job = (await client.get(f"/v1/jobs/{gone['job_id']}/runs")).json()["items"]
    assert [r["job_team"] for r in of_job] == [None]


async def test_one_read_of_jobs_per_page(
    client: httpx.AsyncClient, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "c"):
        await trigger(client, name)
    reads: list[list[str]] = []
    get_jobs = env.store.get_jobs

    async def counted(job_ids: Sequence[str]) -> dict[str, Job]:
        reads.append(list(job_ids))
        return await get_jobs(job_ids)

    monkeypatch.setattr(env.store, "get_jobs", counted)
    page = (await client.get("/v1/runs", params={"limit": 2})).json()
    assert [r["job_name"] for r in page["items"]] == ["c", "b"]
    assert len(reads) == 1
    assert sorted(reads[0]) == sorted(r["job_id"] for r in page["items"])
    rest = (await client.get("/v1/runs", params={"cursor": page["next_cursor"]})).json()
    assert [r["job_name"] for r in rest["items"]] == ["a"]
    assert len(reads) == 2
