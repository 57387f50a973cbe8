"""The operator's limits on the API (cronwheel.limits, cronwheel.api.guards.limits): each abuse is
refused with a precise problem+json and writes nothing.

Every test goes through the shared ``client``/``env`` fixtures; limits other than the defaults
are set on the service the app reads them from (``env.service.limits``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import Request

from cronwheel.api.callers.auth import current_caller
from cronwheel.api.callers.failures import REMEMBERED, FailedAuthentications, Waits, refusal_of
from cronwheel.api.guards.limits import MAX_REPEATED, BodyLimit
from cronwheel.api.guards.rate import RateLimiter
from cronwheel.auth.identity import TRUSTED, Caller, CallerKind, Scope
from cronwheel.clock import ManualClock
from cronwheel.errors import PermanentError, RateLimitedError
from cronwheel.jobs.service import MAX_PAYLOAD_BYTES, TargetPolicy
from cronwheel.limits import Limits
from cronwheel.node.server import ServerSettings, http_config, trusted_proxies
from cronwheel.store import JobQuery
from cronwheel.targets.checks import MAX_EXEC_BYTES

from .conftest import BASE_URL, START, Env, bearer, issue_token, job_body

PROBLEM = "application/problem+json"
TYPE = "urn:cronwheel:problem:"
SetLimits = Callable[..., Limits]


@pytest.fixture
def limits(env: Env) -> SetLimits:
    """Change some of the app's limits (the rest keep their defaults)."""

    def change(**changes: Any) -> Limits:
        env.service.limits = dataclasses.replace(Limits(), **changes)
        return env.service.limits

    return change


async def nothing_written(env: Env) -> None:
    assert (await env.store.list_jobs(JobQuery())).items == []
    assert env.changes.empty()
    assert env.queue.published == []


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert (body["type"], body["status"]) == (TYPE + slug, status)
    return body


# -- the request body ------------------------------------------------------------------------------


def largest_job() -> dict[str, Any]:
    """The largest job body the API accepts (measured: 1,139,919 bytes as compact JSON): a command
    target whose argv and env fill what execve takes, a 64 KiB payload, every label and the
    longest description."""
    env = {f"E{index:03d}" + "N" * 196: "v" * 8192 for index in range(100)}
    used = sum(len(name) + len(value) + 2 + 8 for name, value in env.items())
    argv = ["a" * 4096 for _ in range((MAX_EXEC_BYTES - used) // (4096 + 1 + 8))]
    padding = len(json.dumps({"data": ""}, separators=(",", ":")))
    return job_body(
        "n" * 100,
        "t" * 100,
        target={"type": "command", "argv": argv, "env": env, "cwd": "/" + "c" * 4095},
        payload={"data": "x" * (MAX_PAYLOAD_BYTES - padding)},
        description="d" * 2000,
        labels={f"{index:03d}" + "k" * 97: "v" * 200 for index in range(64)},
    )


async def test_the_largest_legitimate_job_fits_the_default_body_limit(
    client: httpx.AsyncClient, env: Env
) -> None:
    env.service.policy = TargetPolicy(allow_commands=True)
    body = json.dumps(largest_job(), separators=(",", ":")).encode()
    assert 1_100_000 < len(body) < Limits().max_body_bytes / 1.8  # room for whitespace and escapes
    response = await client.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 201, response.text[:500]


async def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(
    client: httpx.AsyncClient, env: Env
) -> None:
    limit = Limits().max_body_bytes
    read: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        read.append(1)
        yield b"{" * (limit + 1)  # not JSON: parsing it would answer 400

    response = await client.post(
        "/v1/jobs",
        content=body(),
        headers={"Content-Type": "application/json", "Content-Length": str(limit + 1)},
    )
    found = problem(response, 413, "body-too-large")
    assert found["max_body_bytes"] == limit
    assert found["detail"] == (
        f"the request body is larger than {limit} bytes, the most this server accepts (--max-body-bytes)"
    )
    assert response.headers["connection"] == "close"
    assert read == []  # not a byte was asked for
    await nothing_written(env)


async def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit(
    client: httpx.AsyncClient, env: Env
) -> None:
    """20 MB without a Content-Length, 64 KiB at a time: refused at the chunk that passes 2 MiB."""
    sent: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        yield json.dumps(job_body())[:-1].encode() + b', "description": "'
        for _ in range(320):
            sent.append(1)
            yield b"x" * 65536
        yield b'"}'

    response = await client.post("/v1/jobs", content=body(), headers={"Content-Type": "application/json"})
    problem(response, 413, "body-too-large")
    assert len(sent) == Limits().max_body_bytes // 65536  # the 32nd chunk passes it; no more read
    await nothing_written(env)


async def test_a_body_within_a_lowered_limit_is_taken_and_one_over_it_is_not(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    body = json.dumps(job_body()).encode()
    limits(max_body_bytes=len(body))
    headers = {"Content-Type": "application/json"}
    refused = await client.post("/v1/jobs", content=body + b" ", headers=headers)
    assert problem(refused, 413, "body-too-large")["max_body_bytes"] == len(body)
    await nothing_written(env)
    assert (await client.post("/v1/jobs", content=body, headers=headers)).status_code == 201


async def test_a_body_read_outside_a_route_is_refused_as_well(env: Env) -> None:
    """An application that reads the body itself, not through a route's parameters."""

    async def reader(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"read"})

    async def app(scope: Any, receive: Any, send: Any) -> None:
        scope["app"] = env.app  # where the middleware finds the limits
        await BodyLimit(reader)(scope, receive, send)

    async def body() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b"x" * 65536

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as raw:
        problem(await raw.post("/", content=body()), 413, "body-too-large")
        assert (await raw.post("/", content=b"small")).text == "read"


# -- the request head -------------------------------------------------------------------------------


async def test_ten_thousand_header_fields_are_refused(client: httpx.AsyncClient, env: Env) -> None:
    headers = [(f"X-Filler-{index}", "v") for index in range(10_000)]
    response = await client.post("/v1/jobs", json=job_body(), headers=headers)
    found = problem(response, 431, "headers-too-large")
    assert found["max_header_count"] == 100
    assert found["detail"].startswith("the request has 10")
    assert found["detail"].endswith("header fields; this server accepts at most 100 (--max-header-count)")
    await nothing_written(env)


async def test_header_fields_too_long_together_are_refused(client: httpx.AsyncClient, env: Env) -> None:
    headers = {f"X-Big-{index}": "v" * 8000 for index in range(5)}
    response = await client.post("/v1/jobs", json=job_body(), headers=headers)
    found = problem(response, 431, "headers-too-large")
    assert found["max_header_bytes"] == 32 * 1024
    assert "(--max-header-bytes)" in found["detail"]
    await nothing_written(env)


async def test_a_large_token_header_is_within_the_defaults(client: httpx.AsyncClient) -> None:
    """An OIDC token with group claims can take 8 KiB."""
    response = await client.get("/v1/jobs", headers={"X-Identity": "j" * 8192})
    assert response.status_code == 200


# -- repeated query parameters ---------------------------------------------------------------------


async def test_a_thousand_label_filters_are_bad_input_not_an_outage(client: httpx.AsyncClient) -> None:
    """SQLite refused them with "Expression tree is too large", answered 503 with Retry-After."""
    params = {"label": [f"k{index}=v" for index in range(1000)]}
    found = problem(await client.get("/v1/jobs", params=params), 422, "validation")
    assert found["errors"] == [
        {
            "location": "query",
            "field": "label",
            "message": f"at most {MAX_REPEATED} values, not 1000",
            "code": "too_many_values",
        }
    ]
    assert "retry-after" not in (await client.get("/v1/jobs", params=params)).headers


async def test_the_bound_on_repeated_parameters(client: httpx.AsyncClient) -> None:
    labels = {"label": [f"k{index}=v" for index in range(MAX_REPEATED)]}
    assert (await client.get("/v1/jobs", params=labels)).status_code == 200
    states = {"state": ["FAILED"] * (MAX_REPEATED + 1)}
    for path in ("/v1/runs", "/v1/jobs/unknown/runs"):
        found = problem(await client.get(path, params=states), 422, "validation")
        assert [error["field"] for error in found["errors"]] == ["state"]


# -- the rate of requests --------------------------------------------------------------------------


async def test_a_caller_over_its_rate_gets_429_with_retry_after_and_nothing_is_written(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    limits(rate_per_s=0.5, rate_burst=3)
    for _ in range(3):
        assert (await client.get("/v1/jobs")).status_code == 200
    response = await client.post("/v1/jobs", json=job_body())
    found = problem(response, 429, "rate-limited")
    assert response.headers["retry-after"] == "2"  # one token at 0.5 a second
    assert found["retry_after_s"] == 2
    assert found["detail"] == (
        "too many requests from this caller: this server allows 0.5 a second (bursts of 3); try again in 2 s"
    )
    await nothing_written(env)
    env.clock.advance(1.5)
    assert (await client.post("/v1/jobs", json=job_body())).headers["retry-after"] == "1"
    env.clock.advance(0.5)
    assert (await client.post("/v1/jobs", json=job_body())).status_code == 201


async def test_the_bucket_refills_up_to_the_burst_only(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    limits(rate_per_s=10, rate_burst=5)
    env.clock.advance(3600)  # an idle hour saves no more than the burst
    statuses = [(await client.get("/v1/jobs")).status_code for _ in range(7)]
    assert statuses == [200] * 5 + [429] * 2
    env.clock.advance(0.2)
    assert [(await client.get("/v1/jobs")).status_code for _ in range(3)] == [200, 200, 429]


async def test_probes_and_metrics_are_not_rate_limited(client: httpx.AsyncClient, limits: SetLimits) -> None:
    limits(rate_per_s=1, rate_burst=1)
    assert (await client.get("/v1/jobs")).status_code == 200
    assert (await client.get("/v1/jobs")).status_code == 429
    for path in ("/healthz", "/readyz", "/metrics", "/v1/healthz"):
        assert (await client.get(path)).status_code == 200, path


async def test_without_authentication_each_address_has_its_own_bucket(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    """The trusted caller of an app without authentication has no identity to count by."""
    limits(rate_per_s=1, rate_burst=1)
    env.app.dependency_overrides[current_caller] = lambda: TRUSTED
    transport = httpx.ASGITransport(app=env.app, client=("192.0.2.7", 50000))
    async with httpx.AsyncClient(
        transport=transport, base_url=client.base_url, headers=client.headers
    ) as other:
        assert (await client.get("/v1/jobs")).status_code == 200
        assert (await client.get("/v1/jobs")).status_code == 429
        assert (await other.get("/v1/jobs")).status_code == 200
        assert (await other.get("/v1/jobs")).status_code == 429


async def test_each_token_has_its_own_bucket_wherever_it_comes_from(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    limits(rate_per_s=1, rate_burst=2)

    def token_caller(request: Request) -> Caller:
        token = request.headers["x-test-token"]
        return Caller(CallerKind.TOKEN, token, token, frozenset({Scope.ADMIN}), None)

    env.app.dependency_overrides[current_caller] = token_caller
    one, two = {"X-Test-Token": "tok-1"}, {"X-Test-Token": "tok-2"}
    assert [(await client.get("/v1/jobs", headers=one)).status_code for _ in range(3)] == [200, 200, 429]
    assert [(await client.get("/v1/jobs", headers=two)).status_code for _ in range(3)] == [200, 200, 429]


def at(env: Env, address: str, token: str | None = None) -> httpx.AsyncClient:
    """A client of the app from ``address`` (with ``token``)."""
    transport = httpx.ASGITransport(app=env.app, client=(address, 40000))
    return httpx.AsyncClient(
        transport=transport, base_url=BASE_URL, headers={} if token is None else bearer(token)
    )


def wrong_secret(token: str) -> str:
    """``token`` with another secret: its id exists, its secret is wrong."""
    return token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")


@pytest.fixture
def lookups(env: Env, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The token ids the store is asked for."""
    asked: list[str] = []
    get_token = env.store.get_token

    async def counted(token_id: str) -> Any:
        asked.append(token_id)
        return await get_token(token_id)

    monkeypatch.setattr(env.store, "get_token", counted)
    return asked


async def statuses(client: httpx.AsyncClient, count: int, token: str | None = None) -> list[int]:
    headers = {} if token is None else bearer(token)
    return [(await client.get("/v1/jobs", headers=headers)).status_code for _ in range(count)]


async def test_failed_authentications_are_counted_by_address_and_then_refused_before_checking(
    env: Env, limits: SetLimits, lookups: list[str]
) -> None:
    """A 401 costs a token lookup and reaches no caller's bucket: the address pays instead."""
    limits(rate_per_s=1, rate_burst=3)
    made_up = [f"cw_{n:012x}_{'x' * 43}" for n in range(4)]  # ids that do not exist
    async with at(env, "192.0.2.1") as attacker:
        assert [(await attacker.get("/v1/jobs", headers=bearer(t))).status_code for t in made_up] == [
            401, 401, 401, 429,
        ]  # fmt: skip
        refused = await attacker.get("/v1/jobs")
        found = problem(refused, 429, "rate-limited")
        assert refused.headers["retry-after"] == "1"
        assert found["detail"].startswith("too many requests that failed authentication from this address")
        assert lookups == [token[3:15] for token in made_up[:3]]  # the fourth was not even looked at
        assert (
            await attacker.post("/v1/jobs", json=job_body(), headers=bearer(made_up[3]))
        ).status_code == 429
        await nothing_written(env)
        assert (await attacker.get("/healthz")).status_code == 200
        env.clock.advance(1)
        assert await statuses(attacker, 1, made_up[3]) == [401]


async def test_an_address_that_keeps_failing_does_not_lock_out_the_tokens_in_use_behind_it(
    env: Env, limits: SetLimits
) -> None:
    """Clients behind one address (a NAT, a proxy the operator did not name) share its bucket:
    a token that authenticated, from there or elsewhere, is still checked when it is spent; a
    token never seen is refused until the failures stop for a moment."""
    limits(rate_per_s=1, rate_burst=3)
    in_use, elsewhere = env.admin_token, await issue_token(env.store, Scope.READ, name="elsewhere")
    unseen = await issue_token(env.store, Scope.READ, name="unseen")
    async with at(env, "192.0.2.1") as shared, at(env, "198.51.100.7") as other:
        assert await statuses(shared, 1, in_use) == [200]
        assert await statuses(other, 1, elsewhere) == [200]
        assert await statuses(shared, 4, "wrong") == [401, 401, 401, 429]
        assert await statuses(shared, 1, in_use) == [200]
        assert await statuses(shared, 1, elsewhere) == [200]
        assert await statuses(shared, 1, unseen) == [429]
        assert await statuses(shared, 1, wrong_secret(in_use)) == [401]  # checked: a token in use
        assert await statuses(shared, 1, "wrong") == [429]


async def test_wrong_secrets_of_one_token_are_limited_from_every_address_but_not_its_holder(
    env: Env, limits: SetLimits, lookups: list[str]
) -> None:
    """Token ids are not secret: failures naming one take from its bucket wherever they come
    from, and once it is spent its secret is not tried from addresses it did not authenticate
    from; its holder, where it authenticated, is served all along."""
    limits(rate_per_s=1, rate_burst=3)
    token = env.admin_token
    async with at(env, "192.0.2.1", token) as holder:
        assert await statuses(holder, 1) == [200]
        tries = []
        for n in range(6):
            async with at(env, f"198.51.100.{n}", wrong_secret(token)) as attacker:
                tries += await statuses(attacker, 1)
        assert tries == [401, 401, 401, 429, 429, 429]
        assert len(lookups) == 1 + 3
        assert await statuses(holder, 2) == [200, 200]
        async with at(env, "203.0.113.5", token) as moved:
            refused = await moved.get("/v1/jobs")  # the holder at an address it never used
            assert problem(refused, 429, "rate-limited")["detail"].startswith(
                "too many failed authentications with this token"
            )
        env.clock.advance(1)
        async with at(env, "203.0.113.5", token) as moved:
            assert await statuses(moved, 1) == [200]


async def test_a_failure_from_the_holder_s_address_ends_its_exemption(env: Env, limits: SetLimits) -> None:
    """Whoever shares the holder's address and knows its id gets one try, not a way around the
    token's bucket."""
    limits(rate_per_s=1, rate_burst=2)
    token = env.admin_token
    async with at(env, "192.0.2.1", token) as holder, at(env, "192.0.2.1", wrong_secret(token)) as neighbour:
        assert await statuses(holder, 1) == [200]
        assert await statuses(neighbour, 3) == [401, 401, 429]
        assert await statuses(holder, 1) == [429]
        env.clock.advance(1)
        assert await statuses(holder, 1) == [200]


@pytest.mark.parametrize(
    ("waits", "refused"),
    [
        (Waits(0, 0, False, False), None),
        (Waits(1, 0, False, False), "from this address"),
        (Waits(1, 0, True, False), None),  # a token in use behind a spent address
        (Waits(0, 1, True, False), "with this token"),
        (Waits(1, 1, True, False), "with this token"),
        (Waits(1, 1, True, True), None),  # the holder, where it authenticated
        (Waits(0, 1, False, False), "with this token"),
    ],
)
def test_refusal_of(waits: Waits, refused: str | None) -> None:
    decided = refusal_of(waits)
    assert (decided is None) == (refused is None)
    assert decided is None or refused is None or decided[1].endswith(refused)


def test_authentications_remembered_are_bounded_and_forgotten_in_time() -> None:
    clock = ManualClock(START)
    failures = FailedAuthentications(RateLimiter(clock), max_remembered=4)
    limits = Limits(rate_per_s=1, rate_burst=1)
    for n in range(3):
        failures.succeeded(f"192.0.2.{n}", f"{n:012x}")  # two keys each: the first token is pushed out
    for n in (0, 2):
        failures.failed("192.0.2.9", f"{n:012x}", limits)  # the token's bucket spent
    failures.admit("192.0.2.2", f"{2:012x}", limits)  # remembered where it authenticated
    with pytest.raises(RateLimitedError):
        failures.admit("192.0.2.0", f"{0:012x}", limits)
    clock.advance(REMEMBERED)
    failures.failed("192.0.2.9", f"{2:012x}", limits)
    with pytest.raises(RateLimitedError):
        failures.admit("192.0.2.2", f"{2:012x}", limits)  # remembered no longer


def test_the_buckets_kept_are_bounded_full_ones_forgotten_first() -> None:
    clock = ManualClock(START)
    limiter = RateLimiter(clock, max_buckets=2)
    limits = Limits(rate_per_s=1, rate_burst=1)
    for key in ("a", "b"):
        limiter.admit(key, limits)
    clock.advance(1)  # a and b are full again: nothing to remember about them
    limiter.admit("c", limits)
    limiter.admit("d", limits)  # three buckets: a and b (full) are forgotten
    with pytest.raises(RateLimitedError):
        limiter.admit("c", limits)  # c's empty bucket was kept
    limiter.admit("e", limits)  # c, d and e are all empty: the least recently used (d) goes
    limiter.admit("d", limits)  # a fresh bucket, though d's was empty: the price of the bound
    with pytest.raises(RateLimitedError):
        limiter.admit("e", limits)


# -- a team's quota of live jobs -------------------------------------------------------------------


async def test_a_team_at_its_quota_gets_409_and_nothing_is_written(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    limits(max_jobs_per_team=2)
    for name in ("a", "b"):
        assert (await client.post("/v1/jobs", json=job_body(name))).status_code == 201
    while not env.changes.empty():
        env.changes.get_nowait()
    response = await client.post("/v1/jobs", json=job_body("c"))
    found = problem(response, 409, "quota-exceeded")
    assert (found["team"], found["quota"]) == ("data", 2)
    assert found["detail"] == (
        "team 'data' already has 2 live jobs, the most this server allows a team "
        "(--max-jobs-per-team); delete one first"
    )
    assert await env.store.find_job("data", "c") is None
    assert env.changes.empty()
    assert (await client.post("/v1/jobs", json=job_body("c", team="ops"))).status_code == 201


async def test_moving_a_job_into_a_full_team_is_refused(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    limits(max_jobs_per_team=1)
    assert (await client.post("/v1/jobs", json=job_body("a"))).status_code == 201
    mover = (await client.post("/v1/jobs", json=job_body("b", team="ops"))).json()
    response = await client.put(f"/v1/jobs/{mover['id']}", json=job_body("b", team="data"))
    problem(response, 409, "quota-exceeded")
    stored = await env.store.get_job(mover["id"])
    assert (stored.team, stored.version) == ("ops", 1)


# -- the minimum interval between fires ------------------------------------------------------------


async def test_a_schedule_firing_more_often_than_the_minimum_is_refused_naming_it(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    limits(min_interval_s=60)
    response = await client.post("/v1/jobs", json=job_body(schedule="*/30 * * * * *", timezone="UTC"))
    found = problem(response, 422, "schedule-too-frequent")
    assert (found["minimum_interval_s"], found["shortest_interval_s"]) == (60, 30)
    assert found["detail"] == (
        "'*/30 * * * * *' (UTC) fires 30 s apart (2026-03-03T00:00:00+00:00, then "
        "2026-03-03T00:00:30+00:00); this server allows at least 60 s between fires (--min-interval)"
    )
    assert found["errors"] == [
        {
            "location": "body",
            "field": "schedule",
            "pointer": "#/schedule",
            "message": found["detail"],
            "code": "schedule_too_frequent",
            "minimum_interval_s": 60,
            "shortest_interval_s": 30,
        }
    ]
    await nothing_written(env)
    assert (await client.post("/v1/jobs", json=job_body(schedule="0 * * * * *"))).status_code == 201


async def test_every_second_is_allowed_by_default(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/jobs", json=job_body(schedule="* * * * * *"))).status_code == 201


async def test_a_dst_change_that_brings_two_fires_closer_is_refused(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    """01:30 and 03:30 are two hours apart on the wall clock, and one hour apart on the night New
    York skips 02:00-03:00 (2026-03-08)."""
    limits(min_interval_s=2 * 3600)
    assert (
        await client.post("/v1/jobs", json=job_body("utc", schedule="30 1,3 * * *", timezone="UTC"))
    ).status_code == 201
    response = await client.post(
        "/v1/jobs", json=job_body("ny", schedule="30 1,3 * * *", timezone="America/New_York")
    )
    found = problem(response, 422, "schedule-too-frequent")
    assert found["shortest_interval_s"] == 3600
    assert "(2026-03-08T01:30:00-05:00, then 2026-03-08T03:30:00-04:00)" in found["detail"]
    assert "fires 1 h apart" in found["detail"]
    assert "this server allows at least 2 h between fires" in found["detail"]
    assert await env.store.find_job("data", "ny") is None


async def test_an_edit_is_judged_only_when_it_changes_the_timing(
    client: httpx.AsyncClient, env: Env, limits: SetLimits
) -> None:
    job = (await client.post("/v1/jobs", json=job_body(schedule="*/10 * * * * *"))).json()
    limits(min_interval_s=60)  # raised after the job was written: it keeps firing, and editable
    described = await client.patch(f"/v1/jobs/{job['id']}", json={"description": "still every 10 s"})
    assert described.status_code == 200
    retimed = await client.patch(f"/v1/jobs/{job['id']}", json={"schedule": "*/20 * * * * *"})
    assert problem(retimed, 422, "schedule-too-frequent")["shortest_interval_s"] == 20
    stored = await env.store.get_job(job["id"])
    assert (stored.schedule, stored.version) == ("*/10 * * * * *", 2)


async def test_a_payload_nested_too_deeply_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, env: Env
) -> None:
    """An array nested 500 deep was stored and then answered 500 (pydantic's serializer gave up on
    the way out); 990 deep, json.loads raised RecursionError and the answer was FastAPI's bare 400."""
    assert (await client.post("/v1/jobs", json=job_body(payload=nested(64)))).status_code == 201
    deep = await client.post("/v1/jobs", json=job_body(name="deep", payload=nested(500)))
    assert problem(deep, 422, "validation")["errors"][0]["field"] == "payload"
    assert "more than 64 arrays or objects deep" in deep.json()["detail"]
    body = json.dumps(job_body(name="deeper", payload="here")).replace('"here"', "[" * 5000 + "]" * 5000)
    deeper = await client.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
    assert "could not be parsed" in problem(deeper, 400, "malformed-json")["detail"]
    job_id = (await client.get("/v1/jobs")).json()["items"][0]["id"]
    trigger = await client.post(f"/v1/jobs/{job_id}/trigger", json={"payload": nested(65)})
    assert problem(trigger, 422, "validation")["errors"][0]["field"] == "payload"
    assert [job.name for job in (await env.store.list_jobs(JobQuery())).items] == ["nightly"]


def nested(depth: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(depth - 1):
        value = [value]
    return value


async def _through_uvicorn(env: Env, trusted: tuple[str, ...]) -> httpx.AsyncClient:
    """A client on 127.0.0.1 of the app as the server's uvicorn configuration wraps it."""
    config = http_config(env.app, ServerSettings(forwarded_allow_ips=trusted))
    config.load()
    transport = httpx.ASGITransport(app=config.loaded_app, client=("127.0.0.1", 40000))
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL, headers=bearer(env.admin_token))


async def _wrong_tokens_forwarded_for(local: httpx.AsyncClient, count: int) -> list[int]:
    """Statuses of ``count`` requests with a wrong token, each forwarded for another address."""
    wrong = {"Authorization": "Bearer wrong"}
    addresses = (f"198.51.100.{n}" for n in range(count))
    return [
        (await local.get("/v1/jobs", headers={**wrong, "X-Forwarded-For": a})).status_code for a in addresses
    ]


async def _recorded_client(env: Env, local: httpx.AsyncClient) -> str | None:
    created = await local.post("/v1/jobs", json=job_body(), headers={"X-Forwarded-For": "203.0.113.9"})
    assert created.status_code == 201, created.text
    entries = (await local.get("/v1/audit", params={"action": "job.create"})).json()["items"]
    client: str | None = entries[0]["client"]
    return client


async def test_a_local_client_rotating_x_forwarded_for_is_limited_as_itself(
    env: Env, limits: SetLimits
) -> None:
    """uvicorn believes X-Forwarded-For from any loopback peer by default: 700 wrong tokens, each
    from another forwarded address, were never refused, and the audit log took any address."""
    limits(rate_per_s=1, rate_burst=5)
    async with await _through_uvicorn(env, ()) as local:
        assert await _recorded_client(env, local) == "127.0.0.1"
        statuses = await _wrong_tokens_forwarded_for(local, 20)
        assert statuses == [401] * 5 + [429] * 15


async def test_forwarded_addresses_are_believed_from_the_proxies_the_operator_names(
    env: Env, limits: SetLimits
) -> None:
    limits(rate_per_s=1, rate_burst=5)
    async with await _through_uvicorn(env, ("127.0.0.1", "10.0.0.0/8")) as local:
        assert await _recorded_client(env, local) == "203.0.113.9"
        statuses = await _wrong_tokens_forwarded_for(local, 20)
        assert statuses == [401] * 20  # each forwarded address has its own bucket


@pytest.mark.parametrize("named", ["127.0.0.1", "10.0.0.0/8, ::1", "", "2001:db8::/32"])
def test_trusted_proxies_are_addresses_or_networks(named: str) -> None:
    assert trusted_proxies(named) == tuple(part.strip() for part in named.split(",") if part.strip())


@pytest.mark.parametrize("named", ["*", "proxy.example", "10.0.0.0/33", "127.0.0.1,,nope"])
def test_anything_else_is_refused_naming_the_option(named: str) -> None:
    with pytest.raises(PermanentError, match="--forwarded-allow-ips"):
        trusted_proxies(named)
    with pytest.raises(PermanentError, match="--forwarded-allow-ips"):
        ServerSettings(forwarded_allow_ips=(named,)).check()
