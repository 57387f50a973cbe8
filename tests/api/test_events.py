"""``GET /v1/events`` (cronwheel.api.events) served by uvicorn on loopback, read by httpx as a
stream: a job's change and its run's arrive as events, a stream hears only its caller's teams
(another team's job is a 404 as its read is), the caps answer 429, a client that leaves frees its
place, and the dashboard's bridge streams it with the session cookie alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from cronwheel.api.events.hub import EventHub
from cronwheel.auth.identity import Scope
from cronwheel.node.server import ServerSettings, bind, http_config

from .conftest import Env, bearer, issue_token, job_body
from .test_limits import SetLimits, limits

__all__ = ["limits"]  # the fixture

WAIT_S = 10.0


@pytest.fixture
async def served(env: Env) -> AsyncIterator[str]:
    """The app on a free loopback port (its URL); the hub reads run events every 50 ms."""
    hub(env).poll_s = 0.05
    listening = bind("127.0.0.1", 0)
    server = uvicorn.Server(http_config(env.app, ServerSettings(), lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        while not server.started:
            assert not serving.done(), "the server did not start"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    finally:
        server.should_exit = True
        await serving
        listening.close()


def hub(env: Env) -> EventHub:
    events = env.app.state.services.events
    assert isinstance(events, EventHub)
    return events


class Stream:
    """An open event stream: its events, read as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next_event(self) -> tuple[str, dict[str, Any]]:
        kind = ""
        async with asyncio.timeout(WAIT_S):
            async for line in self._lines:
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    data = json.loads(line.removeprefix("data: "))
                    assert isinstance(data, dict)
                    return kind, data
        raise AssertionError("the stream ended")

    async def until(self, kind: str, **wanted: Any) -> list[tuple[str, dict[str, Any]]]:
        """The events up to the first ``kind`` event whose data holds ``wanted`` (included)."""
        seen = []
        while True:
            event = await self.next_event()
            seen.append(event)
            if event[0] == kind and all(event[1].get(k) == v for k, v in wanted.items()):
                return seen


@asynccontextmanager
async def stream(url: str, token: str, topics: str) -> AsyncIterator[Stream]:
    async with (
        httpx.AsyncClient(base_url=url, headers=bearer(token)) as http,
        http.stream("GET", "/v1/events", params={"topics": topics}) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        yield Stream(response)


async def opened(url: str, token: str, topics: str) -> httpx.Response:
    """The answer's head only (a refusal is read whole)."""
    async with (
        httpx.AsyncClient(base_url=url, headers=bearer(token)) as http,
        http.stream("GET", "/v1/events", params={"topics": topics}) as response,
    ):
        if response.status_code != 200:
            await response.aread()
        return response


async def wait_for_streams(env: Env, count: int) -> None:
    async with asyncio.timeout(WAIT_S):
        while len(hub(env)) != count:
            await asyncio.sleep(0.01)


async def test_a_job_change_and_its_runs_arrive_as_events(env: Env, served: str) -> None:
    async with (
        httpx.AsyncClient(base_url=served, headers=bearer(env.admin_token)) as http,
        stream(served, env.admin_token, "jobs,runs") as events,
    ):
        created = (await http.post("/v1/jobs", json=job_body())).json()
        assert await events.until("job", id=created["id"]) == [
            ("job", {"id": created["id"], "team": "data", "version": 1})
        ]
        paused = await http.post(f"/v1/jobs/{created['id']}/pause", json={"note": "x"})
        assert paused.status_code == 200, paused.text
        _, data = (await events.until("job", id=created["id"]))[-1]
        assert data["version"] == paused.json()["version"]
        triggered = await http.post(f"/v1/jobs/{created['id']}/trigger", json={})
        assert triggered.status_code in (200, 201, 202), triggered.text
        run_id = triggered.json()["id"]
        _, run = (await events.until("run", id=run_id))[-1]
        assert run == {"id": run_id, "job_id": created["id"], "team": "data", "state": "PENDING"}
        assert (await http.delete(f"/v1/jobs/{created['id']}")).status_code == 204
        assert (await events.until("job", id=created["id"]))[-1][1]["deleted"] is True


async def test_a_stream_hears_only_its_callers_teams(env: Env, served: str) -> None:
    ops = await issue_token(env.store, Scope.READ, Scope.WRITE, team="ops", name="ops")
    async with httpx.AsyncClient(base_url=served, headers=bearer(env.admin_token)) as admin:
        theirs = (await admin.post("/v1/jobs", json=job_body())).json()
        refused = await opened(served, ops, f"job:{theirs['id']}")
        read = await admin.get(f"/v1/jobs/{theirs['id']}", headers=bearer(ops))
        assert refused.status_code == read.status_code == 404
        assert refused.headers["content-type"] == "application/problem+json"
        assert (await opened(served, ops, "job:no-such-job")).status_code == 404
        cluster = await admin.get("/v1/cluster", headers=bearer(ops))
        assert (await opened(served, ops, "cluster")).status_code == cluster.status_code == 403
        async with stream(served, ops, "jobs,runs") as events:
            await admin.post(f"/v1/jobs/{theirs['id']}/trigger", json={})
            await admin.patch(f"/v1/jobs/{theirs['id']}", json={"description": "edited"})
            own = (await admin.post("/v1/jobs", json=job_body(team="ops"))).json()
            ran = (await admin.post(f"/v1/jobs/{own['id']}/trigger", json={})).json()
            seen = await events.until("run", id=ran["id"])
    assert {data["team"] for _, data in seen} == {"ops"}
    assert theirs["id"] not in {data.get("job_id", data["id"]) for _, data in seen}


async def test_bad_topics_are_a_422_naming_them(env: Env, served: str) -> None:
    for topics in ("", "jobs,nope", "job:", ",".join(["jobs"] * 33)):
        refused = await opened(served, env.admin_token, topics)
        assert refused.status_code == 422, topics
        assert refused.json()["errors"][0]["field"] == "topics"
    assert len(hub(env)) == 0


async def test_streams_beyond_the_caps_are_429_and_a_client_that_leaves_frees_its_place(
    env: Env, served: str, limits: SetLimits
) -> None:
    limits(max_streams=2, max_streams_per_caller=1)
    other = await issue_token(env.store, Scope.READ, team="data", name="other")
    third = await issue_token(env.store, Scope.READ, team="data", name="third")
    async with stream(served, env.admin_token, "jobs"):
        await wait_for_streams(env, 1)
        refused = await opened(served, env.admin_token, "runs")
        assert refused.status_code == 429
        assert refused.json()["type"].endswith("too-many-streams")
        assert "--max-streams-per-caller" in refused.json()["detail"]
        async with stream(served, other, "jobs"):
            full = await opened(served, third, "jobs")
            assert full.status_code == 429
            assert "--max-streams)" in full.json()["detail"]
    await wait_for_streams(env, 0)  # both clients left: their places are free
    async with stream(served, env.admin_token, "jobs"), stream(served, third, "jobs"):
        assert len(hub(env)) == 2


async def test_the_dashboard_streams_with_its_session_cookie_alone(env: Env, served: str) -> None:
    async with httpx.AsyncClient(base_url=served) as browser:
        login = await browser.post("/ui/session", headers=bearer(env.admin_token))
        assert login.status_code == 201
        foreign = await browser.get("/ui/api/v1/events?topics=jobs", headers={"Sec-Fetch-Site": "same-site"})
        assert foreign.status_code == 403  # another origin of the site: the CSRF header is wanted
        own = {"Sec-Fetch-Site": "same-origin"}
        assert (await browser.get("/ui/api/v1/jobs", headers=own)).status_code == 403  # other reads: CSRF
        async with browser.stream("GET", "/ui/api/v1/events?topics=jobs", headers=own) as response:
            assert response.status_code == 200
            events = Stream(response)
            async with httpx.AsyncClient(base_url=served, headers=bearer(env.admin_token)) as http:
                created = (await http.post("/v1/jobs", json=job_body())).json()
            assert (await events.until("job", id=created["id"]))[-1][1]["version"] == 1
    await wait_for_streams(env, 0)
