"""Every answer of the API app says ``X-Content-Type-Options: nosniff``, once: routes, problems,
the dashboard, the docs, the probes, 404s, refusals made by middlewares before routing, and the
500 of an error nothing handled (cronwheel.api.guards.nosniff)."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from cronwheel.api.callers.auth import current_caller
from cronwheel.limits import Limits

from .conftest import Env, job_body

JSON = "application/json"

ANSWERS: list[tuple[int, str, str, dict[str, Any]]] = [
    (200, "GET", "/v1/jobs", {}),
    (201, "POST", "/v1/jobs", {"json": job_body()}),
    (404, "GET", "/v1/jobs/nope", {}),
    (422, "GET", "/v1/jobs?limit=0", {}),
    (404, "GET", "/nowhere", {}),
    (405, "DELETE", "/healthz", {}),
    (401, "GET", "/v1/jobs", {"headers": {"Authorization": "Bearer wrong"}}),
    (421, "GET", "/v1/jobs", {"headers": {"Host": "rebind.attacker.example"}}),
    (400, "GET", "/v1/jobs", {"headers": {"Host": "[::1]evil"}}),
    (413, "POST", "/v1/jobs", {"content": b"x" * (3 * 1024 * 1024), "headers": {"Content-Type": JSON}}),
    (431, "GET", "/v1/jobs", {"headers": {f"X-{n}": "v" for n in range(200)}}),
    (403, "POST", "/v1/jobs", {"json": {}, "headers": {"Origin": "https://evil.example"}}),
    (200, "GET", "/healthz", {}),
    (200, "GET", "/readyz", {}),
    (200, "GET", "/metrics", {}),
    (200, "GET", "/openapi.json", {}),
    (200, "GET", "/docs", {}),
    (200, "GET", "/docs/assets/swagger-ui.css", {}),
    (200, "GET", "/ui/", {}),
    (200, "GET", "/ui/assets/app.js", {}),
    (401, "GET", "/ui/api/v1/jobs", {}),  # the session bridge's own refusal
]


@pytest.mark.parametrize(("status", "method", "path", "options"), ANSWERS)
async def test_every_kind_of_answer_says_nosniff_once(
    client: httpx.AsyncClient, status: int, method: str, path: str, options: dict[str, Any]
) -> None:
    response = await client.request(method, path, **options)
    assert response.status_code == status
    assert response.headers.get_list("x-content-type-options") == ["nosniff"]


async def test_the_429_and_the_500_say_it_too(env: Env, client: httpx.AsyncClient) -> None:
    env.service.limits = dataclasses.replace(Limits(), rate_per_s=1, rate_burst=1)
    assert (await client.get("/v1/jobs", headers={"Authorization": "Bearer wrong"})).status_code == 401
    limited = await client.get("/v1/jobs", headers={"Authorization": "Bearer wrong"})
    assert limited.status_code == 429
    assert limited.headers.get_list("x-content-type-options") == ["nosniff"]

    def broken() -> None:
        raise RuntimeError("a bug")

    env.app.dependency_overrides[current_caller] = broken
    failed = await client.get("/v1/jobs")
    assert failed.status_code == 500
    assert failed.headers.get_list("x-content-type-options") == ["nosniff"]
