"""Schedule preview, health and readiness, OpenAPI and docs, and errors outside the routes."""

from __future__ import annotations

import logging

import httpx
import pytest
from sqlalchemy import text
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive, Scope, Send

from cronwheel.api.app import ApiServices, create_app
from cronwheel.api.problems import UnexpectedErrors
from cronwheel.store import JobQuery
from cronwheel.store.driver import translated_errors

from .conftest import Env, job_body

PROBLEM = "application/problem+json"


async def test_preview_marks_dst_and_warns(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/schedules/preview",
        json={
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "after": "2026-03-07T00:00:00-05:00",
            "count": 3,
        },
    )
    assert response.status_code == 200, response.text
    preview = response.json()
    assert (preview["dst_gap"], preview["dst_fold"], preview["wildcard"]) == ("shift", "first", False)
    assert preview["description"] == "at 02:30 every day"
    assert [(f["at"], f["utc"], f["kind"]) for f in preview["fires"]] == [
        ("2026-03-07T02:30:00-05:00", "2026-03-07T07:30:00Z", "normal"),
        ("2026-03-08T03:00:00-04:00", "2026-03-08T07:00:00Z", "shifted"),
        ("2026-03-09T02:30:00-04:00", "2026-03-09T06:30:00Z", "normal"),
    ]
    assert preview["fires"][1]["wall"] == "2026-03-08T02:30:00"
    assert preview["fires"][1]["offset_s"] == -4 * 3600
    assert any("does not exist in America/New_York" in warning for warning in preview["warnings"])


async def test_preview_defaults_to_the_clock_and_options(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/schedules/preview",
        json={"expression": "H * * * *", "seed": "job-1", "count": 2, "dst_gap": "skip", "dst_fold": "both"},
    )
    preview = response.json()
    assert preview["after"] == "2026-03-02T12:00:00Z"
    assert len(preview["fires"]) == 2
    assert preview["fires"][0]["utc"].startswith("2026-03-02T12:")
    assert (preview["dst_gap"], preview["dst_fold"]) == ("skip", "both")
    assert preview["description"].startswith("hourly at minute ")
    assert preview["description"].endswith(" (H)")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expression": "61 * * * *"}, "expression"),
        ({"expression": "* * * * *", "timezone": "Atlantis/Capital"}, "timezone"),
        ({"expression": "* * * * *", "count": 0}, "count"),
        ({"expression": "* * * * *", "after": "2026-03-07T00:00:00"}, "after"),
        ({"expression": "* * * * *", "dst_fold": "never"}, "dst_fold"),
        ({"expression": "* * * * *", "n": 3}, "n"),
        ({}, "expression"),
    ],
)
async def test_preview_refusals_name_the_field(
    client: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    response = await client.post("/v1/schedules/preview", json=body)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    assert field in [error["field"] for error in response.json()["errors"]]


async def test_preview_schedule_error_has_column(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/schedules/preview", json={"expression": "0 9 * * MON-FUN"})
    (error,) = response.json()["errors"]
    assert (error["field"], error["cron_field"], error["column"]) == ("expression", "day-of-week", 13)


async def test_healthz_and_readyz(client: httpx.AsyncClient, env: Env) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/v1/healthz")).status_code == 200
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"store": True}}
    env.readiness.extra["queue"] = False
    not_ready = await client.get("/readyz")
    assert not_ready.status_code == 503
    assert not_ready.headers["content-type"] == PROBLEM
    assert not_ready.json()["checks"] == {"store": True, "queue": False}
    assert "queue" in not_ready.json()["detail"]


async def test_readyz_when_the_store_is_gone(env: Env) -> None:
    await env.store.close()

    async def broken() -> dict[str, bool]:
        raise RuntimeError("boom")

    app = create_app(ApiServices(env.store, env.service, env.clock, broken))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"readiness": False}


async def test_openapi_and_docs(client: httpx.AsyncClient) -> None:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert spec["info"]["title"] == "cronwheel"
    for path in (
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/pause",
        "/v1/jobs/{job_id}/resume",
        "/v1/jobs/{job_id}/trigger",
        "/v1/jobs/{job_id}/runs",
        "/v1/runs/{run_id}",
        "/v1/schedules/preview",
        "/healthz",
        "/readyz",
    ):
        assert path in spec["paths"], path
    assert set(spec["paths"]["/v1/jobs/{job_id}"]) == {"get", "put", "patch", "delete"}
    assert "412" in spec["paths"]["/v1/jobs/{job_id}"]["put"]["responses"]
    schemas = spec["components"]["schemas"]
    assert {"JobCreate", "JobOut", "JobPatch", "RunOut", "RunDetailOut", "PreviewIn"} <= set(schemas)
    target = schemas["JobCreate"]["properties"]["target"]
    assert target["discriminator"]["propertyName"] == "type"
    assert schemas["JobCreate"]["additionalProperties"] is False
    docs = await client.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


async def test_unknown_route_and_method(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM
    assert missing.json()["instance"] == "/v1/nothing-here"
    wrong = await client.put("/v1/jobs")
    assert wrong.status_code == 405
    assert wrong.headers["content-type"] == PROBLEM
    assert "allow" in wrong.headers


async def test_unexpected_errors_are_500_without_internals(
    client: httpx.AsyncClient, env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def explode(query: JobQuery) -> None:
        raise RuntimeError("password=hunter2 at /srv/secret/path")

    monkeypatch.setattr(env.store, "list_jobs", explode)
    with caplog.at_level(logging.ERROR, logger="cronwheel.api"):
        response = await client.get("/v1/jobs")
    assert response.status_code == 500
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["title"] == "Internal server error"
    assert "hunter2" not in response.text
    assert "RuntimeError" not in response.text
    assert "unexpected error on GET /v1/jobs" in caplog.text


async def test_the_unavailable_log_line_names_the_error_not_the_sql(
    client: httpx.AsyncClient, env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A store failure with a secret among its SQL parameters (the review saw them in this line)."""

    async def failing(query: JobQuery) -> None:
        async with env.store.engine.connect() as connection:
            with translated_errors():
                await connection.execute(text("SELECT * FROM gone WHERE token = :v"), {"v": "tok-77c1"})

    monkeypatch.setattr(env.store, "list_jobs", failing)
    with caplog.at_level(logging.WARNING, logger="cronwheel.api"):
        response = await client.get("/v1/jobs")
    assert response.status_code == 503
    messages = [record.getMessage() for record in caplog.records]
    [line] = [message for message in messages if "backend unavailable" in message]
    assert line == (
        "backend unavailable on GET /v1/jobs: the metadata store is unavailable: "
        "OperationalError: no such table: gone"
    )
    assert "tok-77c1" not in caplog.text


async def test_request_bodies_are_not_logged(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    target = {
        "type": "http",
        "url": "https://hooks.example.com/x",
        "headers": {"Authorization": "Bearer tok-123"},
    }
    with caplog.at_level(logging.INFO), caplog.at_level(logging.DEBUG, logger="cronwheel"):
        await client.post("/v1/jobs", json=job_body(target=target))
        await client.post("/v1/jobs", json=job_body(target=target))  # 409
        await client.post("/v1/jobs", json=job_body(name="x y", target=target))  # 422
    assert "tok-123" not in caplog.text


async def test_a_client_that_leaves_mid_request_is_not_an_unexpected_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def leaving(scope: Scope, receive: Receive, send: Send) -> None:
        raise ClientDisconnect()

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    scope: Scope = {"type": "http", "method": "GET", "path": "/v1/jobs", "headers": []}
    with caplog.at_level(logging.DEBUG, logger="cronwheel.api"):
        await UnexpectedErrors(leaving)(scope, receive, send)
    assert sent == []  # no answer: the client is gone
    assert "unexpected error" not in caplog.text
    assert "client left during GET /v1/jobs" in caplog.text
