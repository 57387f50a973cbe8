"""``GET /v1/schedules/upcoming``: fires per bucket and team in the coming window, behind the team
walls (a team's token counts only its teams' jobs, an admin of every team all), exact against a
count made job by job from the engine (a herd at the top of the hour, a DST day in New York),
paused and complete jobs left out, a window that is not whole buckets ending with a shorter one;
callers asking the same window, buckets and teams within a few seconds share one count (its
``computed_at`` says when), another team set never shares another's."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from cronwheel.api.services import UPCOMING_KEPT_S
from cronwheel.auth.identity import Scope
from cronwheel.schedule import parse_schedule

from .conftest import Env, issue_token, job_body

PROBLEM = "application/problem+json"


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _by_bucket(answer: dict[str, Any]) -> dict[datetime, Counter[str]]:
    return {_utc(bucket["at"]): Counter(bucket["teams"]) for bucket in answer["buckets"]}


def _one_by_one(
    specs: list[tuple[str, str, str]], start: datetime, window: timedelta, bucket: timedelta
) -> dict[datetime, Counter[str]]:
    """Each job's fires from the engine alone (``iter_after``), bucketed: the reference."""
    found: dict[datetime, Counter[str]] = {}
    for team, schedule, zone in specs:
        for fire in parse_schedule(schedule, zone).iter_after(start - timedelta(microseconds=1)):
            moment = fire.astimezone(UTC)
            if moment >= start + window:
                break
            at = start + (moment - start) // bucket * bucket
            found.setdefault(at, Counter())[team] += 1
    return found


async def _create(client: httpx.AsyncClient, specs: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    made = []
    for n, (team, schedule, zone) in enumerate(specs):
        response = await client.post(
            "/v1/jobs", json=job_body(f"job-{n}", team, schedule=schedule, timezone=zone)
        )
        assert response.status_code == 201, response.text
        made.append(response.json())
    return made


HERD = [
    *(("ops", "0 * * * *", "UTC") for _ in range(6)),
    ("data", "*/10 * * * *", "Europe/Berlin"),
    ("data", "*/30 * * * * *", "UTC"),
    ("web", "7,37 * * * *", "America/New_York"),
]


async def test_an_hour_per_second_is_exact_and_the_herd_tops_it(client: httpx.AsyncClient, env: Env) -> None:
    await _create(client, HERD)
    start = env.clock.set(datetime(2026, 3, 2, 12, 0, 30, tzinfo=UTC))
    response = await client.get("/v1/schedules/upcoming", params={"window": 3600, "bucket": 1})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (_utc(answer["start"]), answer["window_s"], answer["bucket_s"]) == (start, 3600, 1)
    assert _by_bucket(answer) == _one_by_one(HERD, start, timedelta(hours=1), timedelta(seconds=1))
    tallest = max(answer["buckets"], key=lambda bucket: bucket["total"])
    assert _utc(tallest["at"]) == datetime(2026, 3, 2, 13, tzinfo=UTC)
    assert tallest["teams"] == {"ops": 6, "data": 2}
    assert answer["jobs"] == len(HERD)
    assert answer["teams"] == {"data": 6 + 120, "ops": 6, "web": 2}
    assert answer["fires"] == sum(answer["teams"].values())


async def test_a_dst_day_per_minute_is_exact(client: httpx.AsyncClient, env: Env) -> None:
    """New York springs forward on 2026-03-08: 02:30 does not exist and the fixed-time job fires
    once when the gap ends, 03:00 EDT (07:00 UTC)."""
    specs = [("data", "30 2 * * *", "America/New_York"), ("ops", "15 * * * *", "America/New_York")]
    await _create(client, specs)
    start = datetime(2026, 3, 8, 0, tzinfo=UTC)
    env.clock.set(start + timedelta(seconds=20))  # the window starts at the minute
    response = await client.get("/v1/schedules/upcoming", params={"window": 86400, "bucket": 60})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert _utc(answer["start"]) == start
    found = _by_bucket(answer)
    assert found == _one_by_one(specs, start, timedelta(days=1), timedelta(minutes=1))
    assert found[datetime(2026, 3, 8, 7, tzinfo=UTC)] == Counter({"data": 1})
    assert answer["teams"] == {"data": 1, "ops": 24}


async def test_a_team_sees_only_its_teams_jobs(client: httpx.AsyncClient, env: Env) -> None:
    await _create(client, HERD)
    token = await issue_token(env.store, Scope.READ, team="web")
    async with env.client(token) as web:
        answer = (await web.get("/v1/schedules/upcoming", params={"window": 3600, "bucket": 60})).json()
    assert answer["teams"] == {"web": 2}
    assert answer["jobs"] == 1
    assert {team for bucket in answer["buckets"] for team in bucket["teams"]} == {"web"}
    every = (await client.get("/v1/schedules/upcoming", params={"window": 3600, "bucket": 60})).json()
    assert set(every["teams"]) == {"ops", "data", "web"}


async def test_paused_and_complete_jobs_do_not_count(client: httpx.AsyncClient, env: Env) -> None:
    paused, once, ends = await _create(
        client,
        [
            ("ops", "0 * * * *", "UTC"),
            ("ops", "@at 2026-03-02T12:30:00+00:00", "UTC"),
            ("ops", "*/5 * * * *", "UTC"),
        ],
    )
    assert (await client.post(f"/v1/jobs/{paused['id']}/pause", json={})).status_code == 200
    # a job whose end has passed is complete: no cursor
    patched = await client.patch(f"/v1/jobs/{ends['id']}", json={"end_at": "2026-03-02T12:10:00Z"})
    assert patched.status_code == 200, patched.text
    env.clock.set(datetime(2026, 3, 2, 12, 20, tzinfo=UTC))
    answer = (await client.get("/v1/schedules/upcoming", params={"window": 3600, "bucket": 60})).json()
    assert answer["teams"] == {"ops": 1}  # the one-time job, at 12:30
    assert [bucket["at"] for bucket in answer["buckets"]] == ["2026-03-02T12:30:00Z"]
    assert (await client.post(f"/v1/jobs/{paused['id']}/resume", json={})).status_code == 200
    env.clock.advance(UPCOMING_KEPT_S)  # past the shared count's age
    answer = (await client.get("/v1/schedules/upcoming", params={"window": 3600, "bucket": 60})).json()
    assert answer["teams"] == {"ops": 2}
    assert once["id"]


async def test_a_window_that_is_not_whole_buckets_ends_with_a_shorter_one(
    client: httpx.AsyncClient, env: Env
) -> None:
    await _create(client, [("ops", "*/30 * * * * *", "UTC")])
    answer = (await client.get("/v1/schedules/upcoming", params={"window": 100, "bucket": 60})).json()
    assert [(bucket["at"], bucket["total"]) for bucket in answer["buckets"]] == [
        ("2026-03-02T12:00:00Z", 2),  # 12:00:00 and 12:00:30
        ("2026-03-02T12:01:00Z", 2),  # 12:01:00 and 12:01:30, before the window ends at 12:01:40
    ]
    response = await client.get("/v1/schedules/upcoming", params={"window": 59, "bucket": 1})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM


async def test_without_a_token_it_answers_401(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.get("/v1/schedules/upcoming")
    assert response.status_code == 401


async def test_callers_asking_alike_within_seconds_share_one_count(
    client: httpx.AsyncClient, env: Env
) -> None:
    await _create(client, HERD)
    params = {"window": 3600, "bucket": 60}
    counted_at = env.clock.now()
    first = (await client.get("/v1/schedules/upcoming", params=params)).json()
    assert _utc(first["computed_at"]) == counted_at
    body = job_body("one-more", "ops", schedule="0 * * * *", timezone="UTC")
    assert (await client.post("/v1/jobs", json=body)).status_code == 201
    env.clock.advance(UPCOMING_KEPT_S - 1)
    shared = (await client.get("/v1/schedules/upcoming", params=params)).json()
    assert shared == first  # the same count, its age in computed_at
    env.clock.advance(1)
    fresh = (await client.get("/v1/schedules/upcoming", params=params)).json()
    assert _utc(fresh["computed_at"]) == counted_at + timedelta(seconds=UPCOMING_KEPT_S)
    assert (fresh["jobs"], fresh["teams"]["ops"]) == (first["jobs"] + 1, first["teams"]["ops"] + 1)


async def test_a_teams_count_is_never_another_callers(client: httpx.AsyncClient, env: Env) -> None:
    """The admin's count of every team is kept first; a team's token, asking the same window and
    buckets at once, gets a count of its own teams only."""
    await _create(client, HERD)
    params = {"window": 3600, "bucket": 60}
    every = (await client.get("/v1/schedules/upcoming", params=params)).json()
    assert set(every["teams"]) == {"ops", "data", "web"}
    token = await issue_token(env.store, Scope.READ, team="web")
    async with env.client(token) as web:
        answer = (await web.get("/v1/schedules/upcoming", params=params)).json()
    assert (answer["teams"], answer["jobs"]) == ({"web": 2}, 1)
