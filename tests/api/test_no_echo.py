"""No problem repeats a value the client sent and the API refused: a problem names the field,
parameter or header instead. A refused value may be anything (markup, a secret pasted into the
wrong field, a log-injection line); echoed, it lands wherever problems are shown or logged.

Each refusal path gets a distinctive marker, and the marker must not appear in the answer."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from .conftest import job_body

MARKER = "zq7marker"
JSON = {"Content-Type": "application/json"}
HTTP = {"type": "http", "url": "https://hooks.example.com/x"}


REFUSALS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("label filter", "GET", "/v1/jobs", {"params": {"label": MARKER}}),
    ("state filter", "GET", "/v1/runs", {"params": {"state": MARKER}}),
    ("team filter", "GET", "/v1/jobs", {"params": {"team": MARKER * 20}}),
    ("cursor", "GET", "/v1/jobs", {"params": {"cursor": MARKER}}),
    ("limit", "GET", "/v1/jobs", {"params": {"limit": MARKER}}),
    ("since", "GET", "/v1/audit", {"params": {"since": MARKER}}),
    ("audit action", "GET", "/v1/audit", {"params": {"action": MARKER + "!"}}),
    ("If-Match", "PATCH", "/v1/jobs/j", {"json": {}, "headers": {"If-Match": MARKER}}),
    ("Host", "GET", "/v1/jobs", {"headers": {"Host": f"{MARKER}.example"}}),
    ("bad Host", "GET", "/v1/jobs", {"headers": {"Host": f"{MARKER}@x"}}),
    ("Sec-Fetch-Site", "POST", "/v1/jobs", {"json": job_body(), "headers": {"Sec-Fetch-Site": MARKER}}),
    ("Origin", "POST", "/v1/jobs", {"json": job_body(), "headers": {"Origin": f"https://{MARKER}.example"}}),
    ("Content-Type", "POST", "/v1/jobs", {"content": b"{}", "headers": {"Content-Type": f"text/{MARKER}"}}),
    (
        "Idempotency-Key",
        "POST",
        "/v1/jobs/j/trigger",
        {"json": {}, "headers": {"Idempotency-Key": MARKER * 40}},
    ),
    ("token", "GET", "/v1/jobs", {"headers": {"Authorization": f"Bearer {MARKER}"}}),
    ("token id", "GET", "/v1/jobs", {"headers": {"Authorization": f"Bearer cw_{MARKER}_x"}}),
    ("path pattern", "GET", f"/v1/teams/{MARKER}!/jobs/{MARKER}!", {}),
    ("malformed JSON", "POST", "/v1/jobs", {"content": b'{"' + MARKER.encode() + b'": }', "headers": JSON}),
    ("name", "POST", "/v1/jobs", {"json": job_body(name=MARKER + "!")}),
    ("team", "POST", "/v1/jobs", {"json": job_body(team=MARKER + "!")}),
    ("schedule", "POST", "/v1/jobs", {"json": job_body(schedule=MARKER)}),
    ("schedule field", "POST", "/v1/jobs", {"json": job_body(schedule=f"0 {MARKER} * * *")}),
    ("schedule element", "POST", "/v1/jobs", {"json": job_body(schedule=f"0 1,{MARKER} * * *")}),
    ("schedule name", "POST", "/v1/jobs", {"json": job_body(schedule=f"0 3 * * {MARKER}")}),
    ("macro", "POST", "/v1/jobs", {"json": job_body(schedule=f"@{MARKER}")}),
    ("timezone", "POST", "/v1/jobs", {"json": job_body(timezone=f"Europe/{MARKER}")}),
    ("label key", "POST", "/v1/jobs", {"json": job_body(labels={f"{MARKER}!": "x"})}),
    ("unknown field", "POST", "/v1/jobs", {"json": {**job_body(), f"{MARKER}!": 1}}),
    ("target type", "POST", "/v1/jobs", {"json": job_body(target={"type": MARKER})}),
    (
        "url",
        "POST",
        "/v1/jobs",
        {"json": job_body(target={"type": "http", "url": f"ftp://{MARKER}.example/"})},
    ),
    ("header name", "POST", "/v1/jobs", {"json": job_body(target={**HTTP, "headers": {f"{MARKER} x": "v"}})}),
    ("method", "POST", "/v1/jobs", {"json": job_body(target={**HTTP, "method": MARKER})}),
    ("start_at", "POST", "/v1/jobs", {"json": job_body(start_at=MARKER)}),
    (
        "secret ref",
        "POST",
        "/v1/jobs",
        {"json": job_body(target={**HTTP, "headers": {"X": {"secret": MARKER + "!"}}})},
    ),
    ("patch", "PATCH", "/v1/jobs/j", {"json": {"schedule": MARKER}}),
    ("preview", "POST", "/v1/schedules/preview", {"json": {"expression": MARKER}}),
    ("preview zone", "POST", "/v1/schedules/preview", {"json": {"expression": "@daily", "timezone": MARKER}}),
    ("validate", "POST", "/v1/jobs:validate", {"json": job_body(schedule=f"{MARKER} * * * *")}),
    ("token scope", "POST", "/v1/tokens", {"json": {"name": "x", "scopes": [MARKER]}}),
    ("token team", "POST", "/v1/tokens", {"json": {"name": "x", "team": MARKER + "!", "scopes": ["read"]}}),
]
"""Refusals of a value the client sent. Not here, since they say which one: a 404's id or name
(the address the client asked for, as in ``instance``), names that passed their own pattern
before another check refused them (a python target's ``module:function``, a secret a job refers
to), and a field or key that is a plain name (``colour``, ``labels.tier``)."""


@pytest.mark.parametrize(("what", "method", "path", "options"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_a_refused_value_is_never_repeated(
    client: httpx.AsyncClient, what: str, method: str, path: str, options: dict[str, Any]
) -> None:
    response = await client.request(method, path, **options)
    assert 400 <= response.status_code < 500, (what, response.status_code)
    problem = response.json()
    assert response.headers["content-type"] == "application/problem+json"
    assert problem.pop("instance") == httpx.URL(response.request.url).path  # the request's own path
    assert MARKER not in json.dumps(problem), (what, problem)
