"""The Store contract of the upcoming fires' read, on every backend: ``fire_groups`` groups the
live, unpaused, not complete jobs in the database as ``scheduler.upcoming.groups_of`` groups
``due_jobs``: one group per team and distinct expression, zone, DST options, bounds and
calendars; a jittered job and one whose expression may hash its id (``H``) alone. Paused, deleted
and complete jobs are not counted, and the team filter is the query's: a team never reads
another team's groups."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import date, timedelta
from typing import Any

from cronwheel.model import Calendar, CalendarShift, CalendarSpec, FireGroup, new_id
from cronwheel.scheduler.upcoming import groups_of
from cronwheel.store.sql import SqlStore

from .support import START, at, new_job

WEEKENDS = CalendarSpec(weekdays=(6, 7))
NEW_YEAR = CalendarSpec(dates=(date(2027, 1, 1),))


async def _jobs(store: SqlStore, team: str, schedule: str, n: int = 1, **fields: Any) -> list[str]:
    made = []
    for _ in range(n):
        job = await new_job(store, f"{team}-{new_id()}", team=team, schedule=schedule, **fields)
        made.append(job.id)
    return made


async def _herd(store: SqlStore) -> None:
    """Jobs that group, jobs that stand alone, and jobs that must not be counted."""
    for team in ("ops", "web"):
        await store.create_calendar(Calendar(team=team, name="weekends", spec=WEEKENDS))
        await store.create_calendar(Calendar(team=team, name="new-year", spec=NEW_YEAR))
    await _jobs(store, "ops", "0 * * * *", 3)
    await _jobs(store, "web", "0 * * * *", 2)  # the same slots, another team: its own group
    await _jobs(store, "ops", "0 * * * *", 2, timezone="Europe/Berlin")
    await _jobs(store, "ops", "0 * * * *", 1, dst_gap="skip", dst_fold="both")
    await _jobs(store, "ops", "0 * * * *", 2, start_at=at(30))
    await _jobs(store, "ops", "0 * * * *", 1, start_at=at(30), end_at=at(600))
    await _jobs(store, "ops", "0 9 * * *", 2, calendars=("weekends",))
    await _jobs(store, "ops", "0 9 * * *", 1, calendars=("weekends", "new-year"))
    await _jobs(store, "ops", "0 9 * * *", 1, calendars=("weekends",), calendar_shift=CalendarShift.NEXT)
    await _jobs(store, "ops", "H * * * *", 3)  # each hashes its id: alone
    await _jobs(store, "ops", "0 9 * * THU", 2)  # an h in a name: alone, as may_hash says
    await _jobs(store, "web", "*/5 * * * *", 2, jitter_s=30.0)  # each its own offsets: alone
    await _jobs(store, "web", "@hourly", 2)  # a macro has no H: one group
    await _jobs(store, "web", "@every 6h", 2)
    await _jobs(store, "ops", "0 * * * *", 2, paused=True)
    await _jobs(store, "ops", "0 * * * *", 1, next_run_at=None)  # complete: no cursor
    for job_id in await _jobs(store, "ops", "0 * * * *", 2):
        await store.delete_job(job_id, START)


async def test_the_groups_are_the_live_jobs_grouped_as_the_count_groups_them(store: SqlStore) -> None:
    await _herd(store)
    groups = await store.fire_groups(None)
    assert Counter(groups) == Counter(groups_of(await store.due_jobs(START + timedelta(days=3650))))
    assert sum(group.jobs for group in groups) == 26
    assert len(groups) == 18
    herd = {(g.team, g.jobs) for g in groups if g.schedule == "0 * * * *" and g.timezone == "UTC"
            and g.dst_gap is None and g.start_at is None}  # fmt: skip
    assert herd == {("ops", 3), ("web", 2)}  # paused, complete and deleted ones not counted
    bounded = {(g.start_at, g.end_at, g.jobs) for g in groups if g.start_at is not None}
    assert bounded == {(at(30), None, 2), (at(30), at(600), 1)}
    calendared = sorted(
        (g.calendar_spec == WEEKENDS, g.calendar_shift.value, g.jobs) for g in groups if g.calendar_spec
    )
    assert calendared == [(False, "none", 1), (True, "next", 1), (True, "none", 2)]
    alone = [g for g in groups if g.id is not None]
    assert sorted((g.schedule, g.jobs, g.jitter_s) for g in alone) == [
        *([("*/5 * * * *", 1, 30.0)] * 2), *([("0 9 * * THU", 1, 0.0)] * 2), *([("H * * * *", 1, 0.0)] * 3)
    ]  # fmt: skip
    assert [(g.team, g.jobs, g.id) for g in groups if g.schedule == "@hourly"] == [("web", 2, None)]


async def test_a_team_reads_only_its_teams_groups(store: SqlStore) -> None:
    await _herd(store)
    web = await store.fire_groups(["web"])
    assert {group.team for group in web} == {"web"}
    assert sum(group.jobs for group in web) == 2 + 2 + 2 + 2
    every = await store.fire_groups(None)
    assert Counter(await store.fire_groups(["ops", "web"])) == Counter(every)
    assert Counter(web) == Counter(group for group in every if group.team == "web")
    assert await store.fire_groups([]) == []
    assert await store.fire_groups(["nobody"]) == []


async def test_a_paused_deleted_or_complete_job_leaves_its_group(store: SqlStore) -> None:
    ids = await _jobs(store, "ops", "*/10 * * * *", 4)
    assert [(g.jobs, g.id) for g in await store.fire_groups(None)] == [(4, None)]
    job = await store.get_job(ids[0])
    await store.update_job(replace(job, paused=True), job.version)
    await store.delete_job(ids[1], START)
    job = await store.get_job(ids[2])
    await store.update_job(replace(job, next_run_at=None), job.version, move_cursor=True)
    assert await store.fire_groups(None) == [
        FireGroup("ops", 1, "*/10 * * * *", "UTC", None, None, None, None)
    ]
