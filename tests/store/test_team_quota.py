"""Contract: a team's quota of live jobs (``create_job``/``update_job`` with ``team_quota``), on
every backend, and the lock that keeps two writes at once from both taking the last place."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from sqlalchemy import text

from cronwheel.errors import QuotaExceededError
from cronwheel.store import JobQuery
from cronwheel.store.sql import SqlStore, jobs

from .support import START, make_job, new_job


async def _names(store: SqlStore, team: str) -> list[str]:
    page = await store.list_jobs(JobQuery(team=team, limit=1000))
    return sorted(job.name for job in page.items)


async def test_a_full_team_gets_no_new_job_and_nothing_is_written(store: SqlStore) -> None:
    for index in range(3):
        await store.create_job(make_job(f"job-{index}"), team_quota=3)
    refused = make_job("one-too-many")
    with pytest.raises(QuotaExceededError) as raised:
        await store.create_job(refused, team_quota=3)
    assert (raised.value.team, raised.value.quota) == ("ops", 3)
    assert "team 'ops' already has 3 live jobs" in str(raised.value)
    assert await store.find_job("ops", "one-too-many") is None
    assert not await store.job_known(refused.id)
    assert await _names(store, "ops") == ["job-0", "job-1", "job-2"]


async def test_deleted_jobs_and_other_teams_do_not_count(store: SqlStore) -> None:
    first = await store.create_job(make_job("a"), team_quota=2)
    await store.create_job(make_job("b"), team_quota=2)
    await store.create_job(make_job("elsewhere", team="data"), team_quota=2)
    await store.delete_job(first.id, START)
    await store.create_job(make_job("c"), team_quota=2)  # the deleted one freed its place
    assert await _names(store, "ops") == ["b", "c"]
    assert await store.create_job(make_job("no-quota"))  # None: no quota at all


async def test_an_edit_within_a_full_team_is_allowed_but_a_move_into_one_is_not(store: SqlStore) -> None:
    full = [await new_job(store, f"full-{index}", team="full") for index in range(2)]
    mover = await new_job(store, "mover", team="other")
    edited = await store.update_job(dataclasses.replace(full[0], description="new"), None, team_quota=2)
    assert (edited.version, edited.description) == (2, "new")
    with pytest.raises(QuotaExceededError):
        await store.update_job(dataclasses.replace(mover, team="full"), None, team_quota=2)
    unchanged = await store.get_job(mover.id)
    assert (unchanged.team, unchanged.version) == ("other", 1)
    assert await _names(store, "full") == ["full-0", "full-1"]


async def test_concurrent_creates_take_exactly_the_places_left(store: SqlStore) -> None:
    await store.create_job(make_job("existing"), team_quota=4)
    results = await asyncio.gather(
        *(store.create_job(make_job(f"racer-{index}"), team_quota=4) for index in range(10)),
        return_exceptions=True,
    )
    refused = [result for result in results if isinstance(result, QuotaExceededError)]
    assert (len(results) - len(refused), len(refused)) == (3, 7)
    assert len(await _names(store, "ops")) == 4


async def test_a_create_waits_for_a_concurrent_one_of_its_team_before_counting(
    postgres_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL writes concurrently: the first create is held between its count and its insert
    until the second has either counted too (no lock: both would see one place left) or is seen
    waiting for the team's lock. Only one may get the last place."""
    store = postgres_store
    await store.create_job(make_job("existing"), team_quota=2)
    counted: list[str] = []
    first_counted, release = asyncio.Event(), asyncio.Event()
    original = jobs._check_name_free

    async def held(connection: object, team: str, name: str, job_id: str) -> None:
        counted.append(name)
        if name == "first":
            first_counted.set()
            await release.wait()
        await original(connection, team, name, job_id)  # type: ignore[arg-type]

    monkeypatch.setattr(jobs, "_check_name_free", held)
    first = asyncio.create_task(store.create_job(make_job("first"), team_quota=2))
    await first_counted.wait()
    second = asyncio.create_task(store.create_job(make_job("second"), team_quota=2))
    while len(counted) < 2 and not await _waiting_for_a_team_lock(store):
        await asyncio.sleep(0.01)
    release.set()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert [type(result).__name__ for result in results] == ["Job", "QuotaExceededError"]
    assert await _names(store, "ops") == ["existing", "first"]


async def _waiting_for_a_team_lock(store: SqlStore) -> bool:
    async with store.engine.connect() as connection:
        waiting = await connection.scalar(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        )
    return bool(waiting)
