"""Teams are walls (guarantee 8): listings hold only the caller's teams (filtered in the store
query, so pages stay full), another team's job or run is absent, and fields a caller may not set
(another team, a reserved target) are refused with 403, never dropped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cronwheel.api.app import AccessPolicy, ApiServices, create_app
from cronwheel.auth.identity import Scope
from cronwheel.jobs.service import JobService, TargetPolicy

from .conftest import Env, issue_token, job_body


@pytest.fixture
async def data(env: Env) -> AsyncIterator[httpx.AsyncClient]:
    """A client of team data with every scope but admin."""
    text = await issue_token(env.store, Scope.READ, Scope.WRITE, Scope.TRIGGER, team="data")
    async with env.client(text) as http:
        yield http


async def _create(client: httpx.AsyncClient, name: str, team: str, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job_body(name, team, **changes))
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


async def test_listings_hold_full_pages_of_the_callers_teams(
    client: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    mine = []
    for index in range(4):  # the other team's jobs sort between ours
        await _create(client, f"theirs-{index}", "billing")
        mine.append((await _create(client, f"mine-{index}", "data"))["id"])
        await client.post(f"/v1/jobs/{mine[-1]}/trigger", json={})
    first = (await data.get("/v1/jobs", params={"limit": 2})).json()
    assert [job["id"] for job in first["items"]] == mine[:2]
    rest = (await data.get("/v1/jobs", params={"limit": 2, "cursor": first["next_cursor"]})).json()
    assert [job["id"] for job in rest["items"]] == mine[2:]
    assert (await data.get("/v1/jobs", params={"team": "billing"})).json()["items"] == []

    runs = (await data.get("/v1/runs", params={"limit": 3})).json()
    assert len(runs["items"]) == 3
    assert {run["job_team"] for run in runs["items"]} == {"data"}
    theirs = (await client.get("/v1/jobs", params={"team": "billing", "limit": 1})).json()["items"][0]
    await client.post(f"/v1/jobs/{theirs['id']}/trigger", json={})
    everything = (await data.get("/v1/runs", params={"job_id": theirs["id"]})).json()
    assert everything["items"] == []


async def test_another_teams_job_and_run_answer_as_missing_ones(
    client: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    theirs = await _create(client, "payroll", "billing")
    run = (await client.post(f"/v1/jobs/{theirs['id']}/trigger", json={})).json()
    nobody = "01a00000-0000-7000-8000-000000000000"
    cases = [  # (path of theirs, path of nothing, what each path names)
        (f"/v1/jobs/{theirs['id']}", f"/v1/jobs/{nobody}", theirs["id"], nobody),
        ("/v1/teams/billing/jobs/payroll", "/v1/teams/billing/jobs/nothing", "payroll", "nothing"),
        (f"/v1/jobs/{theirs['id']}/runs", f"/v1/jobs/{nobody}/runs", theirs["id"], nobody),
        (f"/v1/runs/{run['id']}", f"/v1/runs/{nobody}", run["id"], nobody),
    ]
    for hidden_path, missing_path, hidden_name, missing_name in cases:
        hidden, missing = await data.get(hidden_path), await data.get(missing_path)
        assert hidden.status_code == missing.status_code == 404
        # the same answer, but for the name the caller sent, which both echo
        assert hidden.json() == {
            key: value.replace(missing_name, hidden_name) if isinstance(value, str) else value
            for key, value in missing.json().items()
        }
    for action in ("pause", "resume", "trigger"):
        assert (await data.post(f"/v1/jobs/{theirs['id']}/{action}", json={})).status_code == 404
    assert (await data.delete(f"/v1/jobs/{theirs['id']}")).status_code == 404
    assert (await client.get(f"/v1/jobs/{theirs['id']}")).json()["paused"] is False


async def test_a_job_cannot_be_made_in_or_moved_to_another_team(
    client: httpx.AsyncClient, data: httpx.AsyncClient
) -> None:
    refused = await data.post("/v1/jobs", json=job_body("x", "billing"))
    assert refused.status_code == 403
    assert refused.json()["detail"] == "this token may not put jobs in team 'billing'"
    job = await _create(data, "mine", "data")
    moved = await data.patch(f"/v1/jobs/{job['id']}", json={"team": "billing"})
    assert moved.status_code == 403
    replaced = await data.put(f"/v1/jobs/{job['id']}", json=job_body("mine", "billing"))
    assert replaced.status_code == 403
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["team"] == "data"
    assert (await client.get("/v1/jobs", params={"team": "billing"})).json()["items"] == []
    assert (await client.patch(f"/v1/jobs/{job['id']}", json={"team": "billing"})).status_code == 200


# -- reserved targets ------------------------------------------------------------------------------


@pytest.fixture
async def reserving(env: Env) -> Env:
    """A server that allows commands, python functions and 10.0.0.0/8, reserving all three."""
    policy = TargetPolicy(allow_commands=True, python_allow=("myapp.*",), allowed_networks=("10.0.0.0/8",))
    env.service = JobService(env.store, env.queue, env.feed, env.clock, policy)
    access = AccessPolicy(("cronwheel.test",), admin_only=frozenset({"command", "python", "network"}))
    env.app = create_app(ApiServices(env.store, env.service, env.clock, env.readiness, access=access))
    return env


COMMAND = {"type": "command", "argv": ["/bin/true"]}
PYTHON = {"type": "python", "function": "myapp.jobs:run"}
PRIVATE = {"type": "http", "url": "http://10.1.2.3/hook"}


@pytest.mark.parametrize("target", [COMMAND, PYTHON, PRIVATE], ids=["command", "python", "network"])
async def test_reserved_targets_are_for_admins_of_every_team(reserving: Env, target: dict[str, Any]) -> None:
    team_admin = await issue_token(reserving.store, Scope.ADMIN, team="data")
    async with reserving.client(team_admin) as http:
        refused = await http.post("/v1/jobs", json=job_body("r", "data", target=target))
        assert refused.status_code == 403, refused.text
        assert "reserved to admins of every team" in refused.json()["detail"]
        assert (await http.get("/v1/jobs")).json()["items"] == []
    async with reserving.client(reserving.admin_token) as admin:
        made = await admin.post("/v1/jobs", json=job_body("r", "data", target=target))
        assert made.status_code == 201, made.text
    async with reserving.client(team_admin) as http:  # the team still edits its other fields
        job_id = made.json()["id"]
        assert (await http.patch(f"/v1/jobs/{job_id}", json={"description": "weekly"})).status_code == 200
        put = await http.put(f"/v1/jobs/{job_id}", json=job_body("r", "data", target=target, description="x"))
        assert put.status_code == 200
        changed = await http.patch(f"/v1/jobs/{job_id}", json={"target": _other(target)})
        assert changed.status_code == 403


def _other(target: dict[str, Any]) -> dict[str, Any]:
    if target["type"] == "command":
        return {"type": "command", "argv": ["/bin/false"]}
    if target["type"] == "python":
        return {"type": "python", "function": "myapp.jobs:other"}
    return {"type": "http", "url": "http://10.9.9.9/hook"}


async def test_public_and_refused_targets_are_not_reserved(reserving: Env) -> None:
    writer = await issue_token(reserving.store, Scope.WRITE, team="data")
    async with reserving.client(writer) as http:
        public = await http.post("/v1/jobs", json=job_body("p", "data"))
        assert public.status_code == 201
        refused = await http.post(
            "/v1/jobs", json=job_body("q", "data", target={"type": "http", "url": "http://192.168.1.1/"})
        )
        assert refused.status_code == 422  # no --allow-network makes it acceptable: not a 403
        other = await http.post(
            "/v1/jobs", json=job_body("f", "data", target={"type": "python", "function": "other.jobs:run"})
        )
        assert other.status_code == 422  # not allowed by --allow-python: refused whoever asks
