"""The Store contract for teams and API tokens (cronwheel.store.port), on every backend:
listings restricted to a caller's teams in the query itself, a run's team read with the run, and
tokens stored as digests, listed, revoked and stamped when used."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import ApiToken, issue
from cronwheel.clock import ManualClock
from cronwheel.errors import ConflictError, InvalidInputError, NotFoundError
from cronwheel.store.port import JobQuery, RunQuery, TokenQuery
from cronwheel.store.sql import SqlStore

from .support import START, at, fire_one, new_job

# -- teams ---------------------------------------------------------------------------------------


async def test_list_jobs_restricted_to_teams_pages_full_pages(store: SqlStore) -> None:
    mine = []
    for index in range(6):  # interleaved with another team's jobs, in id order
        mine.append(await new_job(store, f"mine-{index}", team="data"))
        await new_job(store, f"theirs-{index}", team="billing")
    await new_job(store, "ops-job", team="ops")

    first = await store.list_jobs(JobQuery(teams=("data",), limit=4))
    assert [job.name for job in first.items] == [f"mine-{index}" for index in range(4)]
    assert first.next_cursor is not None
    rest = await store.list_jobs(JobQuery(teams=("data",), limit=4, cursor=first.next_cursor))
    assert [job.name for job in rest.items] == ["mine-4", "mine-5"]
    assert rest.next_cursor is None

    both = await store.list_jobs(JobQuery(teams=("data", "ops")))
    assert {job.team for job in both.items} == {"data", "ops"}
    assert len(both.items) == 7
    assert (await store.list_jobs(JobQuery(team="billing", teams=("data",)))).items == []
    assert (await store.list_jobs(JobQuery(teams=()))).items == []
    assert len((await store.list_jobs(JobQuery(teams=None))).items) == 13


async def test_list_runs_restricted_to_teams_includes_deleted_jobs(store: SqlStore) -> None:
    data = await new_job(store, "a", team="data")
    billing = await new_job(store, "b", team="billing")
    data_runs = [await fire_one(store, data)]
    data = await store.get_job(data.id)
    data_runs.append(await fire_one(store, data))
    await fire_one(store, billing)
    await store.delete_job(data.id, at(5))

    page = await store.list_runs(RunQuery(teams=("data",), limit=1))
    rest = await store.list_runs(RunQuery(teams=("data",), limit=1, cursor=page.next_cursor))
    assert [run.id for run in page.items + rest.items] == [run.id for run in reversed(data_runs)]
    assert rest.next_cursor is None
    assert (await store.list_runs(RunQuery(job_id=billing.id, teams=("data",)))).items == []
    assert len((await store.list_runs(RunQuery())).items) == 3


async def test_a_runs_team_is_read_with_the_run_and_survives_its_jobs_delete(store: SqlStore) -> None:
    job = await new_job(store, team="data")
    run = await fire_one(store, job)
    assert await store.get_run_with_team(run.id) == (run, "data")
    await store.delete_job(job.id, at(1))
    assert await store.get_run_with_team(run.id) == (await store.get_run(run.id), "data")
    with pytest.raises(NotFoundError, match="run nope not found"):
        await store.get_run_with_team("nope")


async def test_job_team_of_live_deleted_and_unknown_jobs(store: SqlStore) -> None:
    job = await new_job(store, team="data")
    assert await store.job_team(job.id) == "data"
    await store.delete_job(job.id, at(1))
    assert await store.job_team(job.id) == "data"
    assert await store.job_team("never-created") is None


# -- tokens --------------------------------------------------------------------------------------


def token(name: str = "ci", team: str | None = "data", **changes: object) -> ApiToken:
    record, _ = issue(name, team, [Scope.READ, Scope.WRITE], START)
    return replace(record, **changes)  # type: ignore[arg-type]


async def test_a_token_round_trips_every_field(store: SqlStore) -> None:
    record = token(
        "deploy",
        "data",
        scopes=frozenset({Scope.TRIGGER, Scope.ADMIN}),
        created_by="0123456789ab",
        expires_at=at(60),
        last_used_at=at(1),
    )
    assert await store.create_token(record) == record
    assert await store.get_token(record.id) == record
    everyone = token("root", None, scopes=frozenset({Scope.ADMIN}))
    assert (await store.create_token(everyone)).team is None


async def test_a_taken_token_id_conflicts_and_an_unknown_one_is_not_found(store: SqlStore) -> None:
    record = await store.create_token(token())
    with pytest.raises(ConflictError, match=record.id):
        await store.create_token(token("other", id=record.id))
    assert len((await store.list_tokens(TokenQuery())).items) == 1
    with pytest.raises(NotFoundError, match="token nope not found"):
        await store.get_token("nope")
    with pytest.raises(NotFoundError):
        await store.revoke_token("nope", START)


async def test_tokens_are_listed_oldest_first_by_team_a_page_at_a_time(store: SqlStore) -> None:
    made = []
    for minute in range(5):
        made.append(await store.create_token(token(f"t{minute}", "data", created_at=at(minute))))
    await store.create_token(token("theirs", "billing", created_at=at(2.5)))
    await store.create_token(token("root", None, created_at=at(3.5)))

    first = await store.list_tokens(TokenQuery(teams=("data",), limit=3))
    rest = await store.list_tokens(TokenQuery(teams=("data",), limit=3, cursor=first.next_cursor))
    assert [t.name for t in first.items + rest.items] == [t.name for t in made]
    assert rest.next_cursor is None
    every = await store.list_tokens(TokenQuery())
    assert [t.name for t in every.items] == ["t0", "t1", "t2", "theirs", "t3", "root", "t4"]
    assert [t.name for t in (await store.list_tokens(TokenQuery(team="billing"))).items] == ["theirs"]
    teams = await store.list_tokens(TokenQuery(teams=("data", "billing")))
    assert "root" not in {t.name for t in teams.items}
    with pytest.raises(InvalidInputError):
        await store.list_tokens(TokenQuery(cursor="not-a-cursor"))


async def test_a_revoked_token_stays_revoked_from_its_first_revocation(
    store: SqlStore, clock: ManualClock
) -> None:
    record = await store.create_token(token())
    revoked = await store.revoke_token(record.id, at(5))
    assert revoked.revoked_at == at(5)
    assert revoked.state(at(5)) == "revoked"
    assert (await store.revoke_token(record.id, at(9))).revoked_at == at(5)
    assert (await store.get_token(record.id)).revoked_at == at(5)
    assert (await store.list_tokens(TokenQuery())).items == []
    assert [t.id for t in (await store.list_tokens(TokenQuery(include_revoked=True))).items] == [record.id]


async def test_last_use_is_written_only_when_stale_and_once_under_concurrency(store: SqlStore) -> None:
    record = await store.create_token(token())
    assert await store.touch_token(record.id, at(1), at(0))
    assert (await store.get_token(record.id)).last_used_at == at(1)
    assert not await store.touch_token(record.id, at(1.5), at(0.5))  # used at 1 > 0.5: fresh
    assert (await store.get_token(record.id)).last_used_at == at(1)
    written = await asyncio.gather(*(store.touch_token(record.id, at(3), at(2)) for _ in range(8)))
    assert sum(written) == 1
    assert (await store.get_token(record.id)).last_used_at == at(3)
    assert not await store.touch_token("nope", at(4), at(4))


async def test_expiry_is_judged_by_the_caller_not_hidden_by_the_store(store: SqlStore) -> None:
    record = await store.create_token(token(expires_at=START + timedelta(minutes=1)))
    stored = await store.get_token(record.id)
    assert stored.state(at(0.5)) == "active"
    assert stored.state(at(1)) == "expired"
    assert [t.id for t in (await store.list_tokens(TokenQuery())).items] == [record.id]
