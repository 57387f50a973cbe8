"""``GET /v1/runs``'s filters (team, reason, since, until, late) and their refusals: what the
runs page of the dashboard and ``cronwheel runs list`` read."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import insert

from cronwheel.auth.identity import Scope
from cronwheel.model import Run, RunKind, RunState, new_id
from cronwheel.store import codec, schema

from .conftest import Env, issue_token, job_body

SECOND = timedelta(seconds=1)


def _run(
    env: Env, job_id: str, minutes_ago: int, late_s: float | None = None, reason: str | None = None
) -> Run:
    slot = env.clock.now() - timedelta(minutes=minutes_ago)
    return Run(
        id=new_id(), job_id=job_id, kind=RunKind.SCHEDULED, slot=slot,
        state=RunState.SKIPPED if reason else RunState.SUCCESS, reason=reason, created_at=slot,
        started_at=None if late_s is None else slot + late_s * SECOND,
    )  # fmt: skip


async def _seed(client: httpx.AsyncClient, env: Env) -> dict[str, Run]:
    data = (await client.post("/v1/jobs", json=job_body("a"))).json()
    ops = (await client.post("/v1/jobs", json=job_body("b", team="ops"))).json()
    runs = {
        "on-time": _run(env, data["id"], 10, late_s=0.1),
        "late": _run(env, data["id"], 9, late_s=2.5),
        "misfire": _run(env, data["id"], 8, reason="misfire"),
        "ops-late": _run(env, ops["id"], 7, late_s=9.0),
        "ops-calendar": _run(env, ops["id"], 6, reason="calendar"),
    }
    async with env.store.engine.begin() as connection:
        await connection.execute(insert(schema.runs), [codec.run_to_row(run) for run in runs.values()])
    return runs


async def _names(client: httpx.AsyncClient, runs: dict[str, Run], **params: str | list[str]) -> list[str]:
    answer = await client.get("/v1/runs", params=params)
    assert answer.status_code == 200, answer.text
    names = {run.id: name for name, run in runs.items()}
    return [names[item["id"]] for item in answer.json()["items"]]


async def test_the_filters_narrow_the_runs_and_combine(client: httpx.AsyncClient, env: Env) -> None:
    runs = await _seed(client, env)
    assert await _names(client, runs) == ["ops-calendar", "ops-late", "misfire", "late", "on-time"]
    assert await _names(client, runs, team="data") == ["misfire", "late", "on-time"]
    assert await _names(client, runs, reason=["misfire", "calendar"]) == ["ops-calendar", "misfire"]
    assert await _names(client, runs, late="true") == ["ops-late", "late"]
    assert await _names(client, runs, late="true", team="data") == ["late"]
    since = (env.clock.now() - timedelta(minutes=9)).isoformat()
    until = (env.clock.now() - timedelta(minutes=7)).isoformat()
    assert await _names(client, runs, since=since, until=until) == ["misfire", "late"]
    assert await _names(client, runs, since=since, state="SUCCESS") == ["ops-late", "late"]
    first = (await client.get("/v1/runs", params={"team": "ops", "limit": 1})).json()
    rest = (
        await client.get("/v1/runs", params={"team": "ops", "limit": 1, "cursor": first["next_cursor"]})
    ).json()
    assert [first["items"][0]["id"], rest["items"][0]["id"]] == [runs["ops-calendar"].id, runs["ops-late"].id]
    assert rest["next_cursor"] is None


async def test_a_team_token_sees_only_its_teams_runs_whatever_team_it_names(
    client: httpx.AsyncClient, env: Env
) -> None:
    runs = await _seed(client, env)
    async with env.client(await issue_token(env.store, Scope.READ, team="data")) as data:
        assert await _names(data, runs, reason="calendar") == []
        assert await _names(data, runs, team="ops") == []
        assert await _names(data, runs, late="true") == ["late"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"reason": "tired"}, "reason"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-03-01T00:00:00"}, "until"),  # no offset
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "until"),
        ({"since": "2026-03-01T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "until"),
        ({"late": "maybe"}, "late"),
        ({"team": "x" * 101}, "team"),
        ({"reason": ["misfire"] * 5}, "reason"),
    ],
)
async def test_a_bad_filter_is_a_422_naming_it(
    client: httpx.AsyncClient, params: dict[str, str | list[str]], field: str
) -> None:
    answer = await client.get("/v1/runs", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    errors = answer.json()["errors"]
    assert {error["field"].split(".")[0] for error in errors} == {field}  # reason.0: the first value
    if "since" in params and "until" in params:
        assert [error["code"] for error in errors] == ["range_order"]  # one field against the other
