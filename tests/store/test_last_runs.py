"""``job_last_run`` (store.sql.last_runs): each job's latest run and its state, kept by the store's
own writes, checked against the correlated "latest run" query it replaces (the oracle) after every
operation of random sequences of fires, manual runs, SKIPPED slots, claims, outcomes, failures,
expired leases, purges and deletions, on SQLite and PostgreSQL; and migration 0012's backfill."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select, text

from cronwheel.model import AttemptResult, Finish, Job, Outcome, Run, RunKind, RunState
from cronwheel.store import codec
from cronwheel.store.driver import create_engine
from cronwheel.store.migrate import run_sync_at
from cronwheel.store.port import JobQuery
from cronwheel.store.schema import job_last_run, jobs, runs
from cronwheel.store.sql import SqlStore, last_runs, leases, lite, open_store
from cronwheel.store.sql.where import latest_run_of_job

from .support import LEASE, START, at, firing_of, make_job, make_run
from .test_migrations import _row_before_0018, _to

NOW = at(10_000)  # the workers' clock: after every slot, so that every retry is due
WORKER = "w1"
JOBS = 3

# One operation: (name, job index, run index, number); each applies to what exists, or does nothing.
operations = st.tuples(
    st.sampled_from(
        [
            "fire",
            "fire_twice",
            "skip",
            "manual",
            "record_skipped",
            "claim",
            "succeed",
            "fail_attempt",
            "retry",
            "fail_run",
            "expire",
            "purge",
            "delete_job",
            "move_team",
        ]
    ),
    st.integers(0, JOBS - 1),
    st.integers(0, 30),
    st.integers(-3, 3),
)


@dataclass
class World:
    """The jobs of one example (a team of their own) and the runs recorded so far."""

    store: SqlStore
    team: str
    jobs: list[Job]
    runs: list[Run] = field(default_factory=list)

    def job(self, index: int) -> Job:
        return self.jobs[index]

    def run(self, index: int) -> Run | None:
        return self.runs[index % len(self.runs)] if self.runs else None


async def _fire(world: World, index: int, states: list[RunState]) -> None:
    """Fire job ``index`` once per state, in one batch (a job fired twice moves twice)."""
    job, firings = world.job(index), []
    for state in states:
        assert job.next_run_at is not None
        run = make_run(job, job.next_run_at, state, reason="misfire" if state is RunState.SKIPPED else None)
        firings.append(firing_of(job, run))
        job = replace(job, next_run_at=job.next_run_at + timedelta(minutes=1))
    result = await world.store.fire(firings, START)
    world.jobs[index] = job
    world.runs += result.accepted + result.skipped


async def _manual(world: World, index: int, minutes: int, state: RunState) -> None:
    """A manual PENDING run, or a SKIPPED slot, at a slot near the job's: older, equal or newer."""
    job = world.job(index)
    assert job.next_run_at is not None
    slot = job.next_run_at + timedelta(minutes=minutes)
    if state is RunState.SKIPPED:
        run = make_run(job, slot, state, reason="paused")
        world.runs += await world.store.record_skipped([run], START)
    elif job.deleted_at is None:  # a deleted job takes no manual run
        stored, _ = await world.store.create_manual_run(make_run(job, slot, kind=RunKind.MANUAL))
        world.runs.append(stored)


async def _finish(world: World, run: Run, outcome: Outcome, retry: bool) -> None:
    current = (await world.store.get_runs([run.id])).get(run.id)
    if current is None or current.state is not RunState.RUNNING:
        return
    finish = Finish(run.id, current.attempts, AttemptResult(outcome), NOW if retry else None)
    await world.store.finish_attempts([finish], WORKER, NOW)


async def apply(world: World, operation: tuple[str, int, int, int]) -> None:
    name, index, number, minutes = operation
    store, run = world.store, world.run(number)
    if name in ("fire", "skip", "fire_twice"):
        states = {"fire": [RunState.PENDING], "skip": [RunState.SKIPPED]}.get(name, [RunState.PENDING] * 2)
        await _fire(world, index, states)
    elif name in ("manual", "record_skipped"):
        await _manual(world, index, minutes, RunState.PENDING if name == "manual" else RunState.SKIPPED)
    elif name == "move_team":  # to the example's other team, and back
        job = world.job(index)
        if job.deleted_at is None:
            team = world.team if job.team != world.team else f"{world.team}-b"
            world.jobs[index] = await store.update_job(replace(job, team=team), None)
    elif name == "delete_job":
        if world.job(index).deleted_at is None:
            world.jobs[index] = await store.delete_job(world.job(index).id, START)
    elif run is None:
        return
    elif name == "claim":  # this run and the next ones: two of one job in a batch, often
        batch = [r.id for r in itertools.islice(itertools.cycle(world.runs), number, number + 3)]
        await store.claim_runs(batch, WORKER, NOW, NOW + LEASE)
    elif name in ("succeed", "fail_attempt", "retry"):
        outcome = Outcome.SUCCESS if name == "succeed" else Outcome.FAILURE
        await _finish(world, run, outcome, retry=name == "retry")
    elif name == "fail_run":
        await store.fail_run(run.id, "refused", NOW)
    elif name == "expire":
        await store.expire_leases(NOW, expired_before=NOW + 2 * LEASE)
    elif name == "purge":
        await store.purge_runs([run.id])


async def oracle(store: SqlStore, job_ids: list[str]) -> dict[str, tuple[str, str, str]]:
    """Each job's latest run, its state and the job's team, by the correlated query
    ``job_last_run`` replaces."""
    statement = select(jobs.c.id, latest_run_of_job(runs.c.id), latest_run_of_job(runs.c.state), jobs.c.team)
    async with store.engine.connect() as connection:
        result = await connection.execute(statement.where(jobs.c.id.in_(job_ids)))
        return {job_id: (run_id, state, team) for job_id, run_id, state, team in result if run_id is not None}


async def recorded(store: SqlStore, job_ids: list[str]) -> dict[str, tuple[str, str, str]]:
    table = job_last_run.c
    statement = select(table.job_id, table.run_id, table.state, table.team)
    async with store.engine.connect() as connection:
        result = await connection.execute(statement.where(table.job_id.in_(job_ids)))
        return {job_id: (run_id, state, team) for job_id, run_id, state, team in result}


async def check(world: World) -> None:
    job_ids = [job.id for job in world.jobs]
    expected = await oracle(world.store, job_ids)
    assert await recorded(world.store, job_ids) == expected
    for state in RunState:  # the list filter, paged two at a time, on the live jobs of the teams
        listed, cursor = [], None
        while True:
            teams = (world.team, f"{world.team}-b")
            query = JobQuery(teams=teams, last_state=state, limit=2, cursor=cursor)
            page = await world.store.list_jobs(query)
            listed += [job.id for job in page.items]
            if (cursor := page.next_cursor) is None:
                break
        live = {job.id for job in world.jobs if job.deleted_at is None}
        assert listed == sorted(j for j in live if j in expected and expected[j][1] == state.value)


_teams = itertools.count()


async def _example(store: SqlStore, steps: list[tuple[str, int, int, int]]) -> None:
    team = f"prop-{next(_teams)}"
    created = [await store.create_job(make_job(f"j{n}", team=team)) for n in range(JOBS)]
    world = World(store, team, created)
    for step in steps:
        await apply(world, step)
        await check(world)


def _property(store_url: str, examples: int, *, shrink: bool = True) -> None:
    """Random operation sequences against one store, the table checked after each operation."""
    with asyncio.Runner() as runner:
        store = runner.run(open_store(store_url))
        try:

            @settings(
                max_examples=examples,
                derandomize=True,
                database=None,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
                phases=list(Phase) if shrink else [Phase.explicit, Phase.generate],
            )
            @given(steps=st.lists(operations, min_size=8, max_size=24))
            def prop(steps: list[tuple[str, int, int, int]]) -> None:
                runner.run(_example(store, steps))

            prop()
        finally:
            runner.run(store.close())


def test_job_last_run_is_the_latest_run_after_every_operation(store_url: str) -> None:
    _property(store_url, examples=60)


def test_the_property_sees_a_missing_write(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation check: without the write of claims and outcomes the property fails (on
    PostgreSQL a batch that one statement takes is noted in that statement, on SQLite in the
    function that runs the batch on the driver's thread: those too)."""

    async def nothing(*args: Any) -> None:
        return None

    monkeypatch.setattr(last_runs, "record_found", nothing)
    monkeypatch.setattr(lite, "_NOTED_SQL", "SELECT :ids")  # SQLite's, on the driver's thread
    monkeypatch.setattr(leases, "_FINISH_NOTED", leases._FINISH_IN_ONE)
    with pytest.raises(AssertionError):
        _property(store_url, examples=60, shrink=False)


# -- migration 0012 ----------------------------------------------------------------------------------


async def _at_0011(store_url: str, rows: Callable[[Job], list[Run]]) -> list[Job]:
    """Two jobs (one with the runs ``rows`` gives, one without), written at revision 0011."""
    await run_sync_at(store_url, _to("0011"))
    engine = create_engine(store_url)
    made = [make_job("with-runs"), make_job("without")]
    try:
        async with engine.begin() as connection:
            for job in made:
                await connection.execute(insert(jobs).values(_row_before_0018(job)))
            for run in rows(made[0]):
                await connection.execute(
                    insert(runs).values(codec.run_to_row(replace(run, created_at=START)))
                )
    finally:
        await engine.dispose()
    return made


async def test_0012_backfills_each_jobs_latest_run_and_downgrades(empty_store_url: str) -> None:
    def history(job: Job) -> list[Run]:
        return [
            make_run(job, at(5), RunState.SUCCESS),
            make_run(job, at(7), RunState.FAILED, id="r-z"),  # same slot as the next: the id decides
            make_run(job, at(7), RunState.SUCCESS, id="r-a", kind=RunKind.MANUAL),
            make_run(job, at(1), RunState.PENDING, kind=RunKind.MANUAL),
        ]

    with_runs, without = await _at_0011(empty_store_url, history)
    await run_sync_at(empty_store_url, _to("0012"))
    store = await open_store(empty_store_url)
    try:
        ids = [with_runs.id, without.id]
        expected = {with_runs.id: ("r-z", "FAILED", "ops")}
        assert await recorded(store, ids) == await oracle(store, ids) == expected
    finally:
        await store.close()
    await run_sync_at(empty_store_url, _to("0011", down=True))
    engine = create_engine(empty_store_url)
    try:
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda sync: sync.dialect.get_table_names(sync))
        assert "job_last_run" not in names
    finally:
        await engine.dispose()


async def test_rebuild_writes_every_jobs_row_again(store: SqlStore) -> None:
    job = await store.create_job(make_job())
    run, _ = await store.create_manual_run(make_run(job, at(3), kind=RunKind.MANUAL))
    async with store.engine.begin() as connection:
        await connection.execute(job_last_run.delete())
        await last_runs.rebuild(connection)
    assert await recorded(store, [job.id]) == {job.id: (run.id, "PENDING", "ops")}


# -- lock order ----------------------------------------------------------------------------------------


async def _deadlocks(store: SqlStore) -> int:
    async with store.engine.connect() as connection:
        await connection.execute(text("SELECT pg_stat_clear_snapshot()"))
        count = await connection.scalar(
            text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        )
    return int(count or 0)


async def test_fires_claims_outcomes_and_sweeps_at_once_never_deadlock(postgres_store: SqlStore) -> None:
    """PostgreSQL, many writers on the same jobs' runs at once: a fire that also flags the runs it
    replaces (overlap=replace: jobs, then runs), claims and outcomes in batches given in opposite
    orders, and lease sweeps. Each writes ``job_last_run`` last and in job id order: the server
    counts no deadlock (a deadlock would be retried by ``retry_lost_races``, unseen but for this count)."""
    store, made = postgres_store, [await postgres_store.create_job(make_job(f"j{n}")) for n in range(40)]
    active: list[str] = []

    async def fire(rounds: int) -> None:
        for _ in range(rounds):
            fired = []
            for index, job in enumerate(made):
                assert job.next_run_at is not None
                run = make_run(job, job.next_run_at)
                fired.append(firing_of(job, run, cancel_run_ids=tuple(active[-80:])))
                made[index] = replace(job, next_run_at=job.next_run_at + timedelta(minutes=1))
            result = await store.fire(fired, START)
            active.extend(run.id for run in result.accepted)

    async def work(reverse: bool, rounds: int) -> None:
        for _ in range(rounds):
            batch = sorted(active[-120:], reverse=reverse)
            claimed = await store.claim_runs(batch, f"w{reverse}", NOW, NOW + LEASE)
            finishes = [
                Finish(run.id, run.attempts, AttemptResult(Outcome.SUCCESS)) for run in claimed.values()
            ]
            await store.finish_attempts(finishes[::2], f"w{reverse}", NOW)
            await asyncio.sleep(0)

    async def sweep(rounds: int) -> None:
        for _ in range(rounds):
            await store.expire_leases(NOW, expired_before=NOW + 2 * LEASE)

    before = await _deadlocks(store)
    await asyncio.gather(fire(15), work(False, 30), work(True, 30), sweep(30))
    await asyncio.sleep(1.2)  # backends flush their statistics at most once a second
    assert await _deadlocks(store) == before
    job_ids = [job.id for job in made]
    assert await recorded(store, job_ids) == await oracle(store, job_ids)
