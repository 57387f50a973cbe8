"""Text no store can hold (U+0000, lone surrogates) is refused at the API's boundary with a 422
that names the field, alike on SQLite and PostgreSQL: never a 500, never a traceback in the log,
nothing written."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwheel.api.schemas.storable import storable, unstorable_path
from cronwheel.auth.identity import Scope
from cronwheel.clock import ManualClock
from cronwheel.store.sql import open_store
from suite_stores import BACKENDS, fresh_postgres_database

from .conftest import START, Env, Readiness, issue_token, job_body
from .doubles import RecordingQueue

NUL = "a\x00b"
SURROGATE = "a\ud800b"


@pytest.fixture(params=BACKENDS)
async def backend_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    """The API over a fresh store of each backend."""
    async with _env(request.param, tmp_path) as env:
        yield env


@contextlib.asynccontextmanager
async def _env(backend: str, tmp_path: Path) -> AsyncIterator[Env]:
    async with contextlib.AsyncExitStack() as stack:
        url = f"sqlite:///{tmp_path / 'sqlite.db'}"
        if backend == "postgresql":
            url = await stack.enter_async_context(fresh_postgres_database(migrated=True))
        clock = ManualClock(START)
        store = await open_store(url, clock=clock)
        stack.push_async_callback(store.close)
        admin = await issue_token(store, Scope.ADMIN, name="test-admin")
        yield Env(store, clock, RecordingQueue(), Readiness(store), admin)


async def _post(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    """``body`` as JSON text with every non-ASCII character escaped (a lone surrogate has no UTF-8)."""
    content = json.dumps(body)
    return await client.post(path, content=content, headers={"Content-Type": "application/json"})


def _no_server_fault(caplog: pytest.LogCaptureFixture) -> None:
    faults = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert not faults, [record.getMessage() for record in faults]


def _names(response: httpx.Response, field: str, location: str = "body") -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert [(e["location"], e["field"], e["code"]) for e in problem["errors"]] == [
        (location, field, "unstorable_text")
    ]
    assert "a\x00b" not in response.text
    assert "\\u0000" not in response.text


# -- the rule ---------------------------------------------------------------------------------------


def test_the_rule_finds_the_first_unstorable_string_and_where_it_is() -> None:
    assert storable("ünïcødé ☃ 𝄞 \x01 \x7f \ufffe")
    assert not storable(NUL)
    assert not storable(SURROGATE)
    assert not storable("\udfff")
    assert unstorable_path({"a": [1, "ok", {"b": NUL}]}) == (("a", 2, "b"), False)
    assert unstorable_path({"a": {NUL: 1}}) == (("a",), True)
    assert unstorable_path(["x", SURROGATE]) == ((1,), False)
    assert unstorable_path({"a": 1.5, "b": None, "c": True, "d": ["\t\n"]}) is None


# -- the findings, on each store ------------------------------------------------------------------


async def test_a_description_with_nul_is_422_naming_it(
    backend_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    async with backend_env.client(backend_env.admin_token) as client:
        response = await client.post("/v1/jobs", json=job_body(description=NUL))
        _names(response, "description")
        assert (await client.get("/v1/jobs")).json()["items"] == []
    _no_server_fault(caplog)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"payload": {"rows": [1, {"note": NUL}]}}, "payload.rows.1.note"),
        ({"payload": {NUL: 1}}, "payload"),
        ({"labels": {"tier": SURROGATE}}, "labels.tier"),
        ({"description": SURROGATE}, "description"),
        ({"target": {"type": "http", "url": "https://hooks.example.com/x", "headers": {"X-A": NUL}}},
         "target.headers.X-A"),
    ],
)  # fmt: skip
async def test_every_body_field_is_checked(
    backend_env: Env, caplog: pytest.LogCaptureFixture, changes: dict[str, Any], field: str
) -> None:
    async with backend_env.client(backend_env.admin_token) as client:
        response = await _post(client, "/v1/jobs", job_body(**changes))
        _names(response, field)
    _no_server_fault(caplog)


async def test_a_pause_note_with_nul_is_422_and_leaves_the_job_running(
    backend_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    async with backend_env.client(backend_env.admin_token) as client:
        job = (await client.post("/v1/jobs", json=job_body())).json()
        response = await client.post(f"/v1/jobs/{job['id']}/pause", json={"note": NUL})
        _names(response, "note")
        assert (await client.get(f"/v1/jobs/{job['id']}")).json()["paused"] is False
    _no_server_fault(caplog)


@pytest.mark.parametrize(
    ("path", "field", "location"),
    [
        ("/v1/jobs?name=a%00b", "name", "query"),
        ("/v1/audit?target=a%00b", "target", "query"),
        ("/v1/runs?job=a%00b&job=ok", "job", "query"),
        ("/v1/jobs/a%00b", "job_id", "path"),
        ("/v1/teams/data/jobs/a%00b", "name", "path"),
    ],
)
async def test_query_and_path_parameters_are_checked(
    backend_env: Env, caplog: pytest.LogCaptureFixture, path: str, field: str, location: str
) -> None:
    async with backend_env.client(backend_env.admin_token) as client:
        _names(await client.get(path), field, location)
    _no_server_fault(caplog)


async def test_without_a_token_the_answer_is_still_401(backend_env: Env) -> None:
    async with backend_env.client() as client:
        assert (await client.get("/v1/jobs?name=a%00b")).status_code == 401


# -- both stores answer alike ---------------------------------------------------------------------

_ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\x00", "\ud800", "\udc00", "\x01", "\x7f", "é", "☃", "𝄞", " ", "\t"]),
        st.characters(codec=None),
    ),
    max_size=12,
)


@st.composite
def _job_changes(draw: st.DrawFn) -> dict[str, Any]:
    text = draw(_ANY_TEXT)
    where = draw(st.sampled_from(["description", "payload", "payload_key", "label", "name"]))
    if where == "payload":
        return {"payload": {"text": text}}
    if where == "payload_key":
        return {"payload": {text: 1}}
    if where == "label":
        return {"labels": {"tier": text}}
    if where == "name":
        return {"name": f"job-{text}"}
    return {"description": text}


def _seen(response: httpx.Response) -> tuple[int, Any]:
    if response.status_code == 201:
        job = response.json()
        return 201, {key: job[key] for key in ("name", "description", "payload", "labels")}
    return response.status_code, [(e["location"], e["field"]) for e in response.json().get("errors", [])]


async def test_both_stores_accept_and_refuse_the_same_strings(tmp_path: Path) -> None:
    """The same random strings (NUL, surrogates, controls, astral characters) in the same fields,
    sent to the API over SQLite and over PostgreSQL: the same answer, and an accepted job reads
    back the same from both."""
    if "postgresql" not in BACKENDS:
        pytest.skip("PostgreSQL opted out (CRONWHEEL_TEST_POSTGRES_URL is set empty)")
    loop = asyncio.get_running_loop()
    async with (
        _env("sqlite", tmp_path) as sqlite_env,
        _env("postgresql", tmp_path) as pg_env,
        sqlite_env.client(sqlite_env.admin_token) as lite,
        pg_env.client(pg_env.admin_token) as pg,
    ):
        counter = iter(range(1_000_000))

        async def both(body: dict[str, Any]) -> tuple[Any, Any]:
            return _seen(await _post(lite, "/v1/jobs", body)), _seen(await _post(pg, "/v1/jobs", body))

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(_job_changes())
        def same_answer(changes: dict[str, Any]) -> None:
            body = job_body(name=f"j{next(counter)}")
            body.update(changes)
            if "name" in changes:
                body["name"] = f"{changes['name']}{next(counter)}"
            on_sqlite, on_pg = asyncio.run_coroutine_threadsafe(both(body), loop).result(30)
            assert on_sqlite == on_pg
            assert on_sqlite[0] in (201, 422)

        await loop.run_in_executor(None, same_answer)
