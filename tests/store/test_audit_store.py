"""The Store contract for the audit log, on every backend (SQLite and PostgreSQL): entries are
appended with the write they record, in its transaction (a write that fails or changes nothing
appends nothing), read newest first a page at a time within the caller's walls, filtered, and
pruned only by the operator's retention. Snapshots never hold a credential."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from cronwheel import failpoints
from cronwheel.audit import Actor, AuditAction, AuditEntry, AuditQuery
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import PREFIX, issue
from cronwheel.clock import ManualClock
from cronwheel.errors import ConflictError, InvalidInputError
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.model import HttpTarget, RunKind, RunState, SecretRef
from cronwheel.queue.memory import MemoryQueue
from cronwheel.store.port import StoredSecret
from cronwheel.store.snapshots import REDACTED, job_snapshot
from cronwheel.store.sql import SqlStore

from .support import START, at, make_job, make_run

ACTOR = Actor("token", "tok-1", "deploy-bot", "192.0.2.7")


def entry(
    action: AuditAction = AuditAction.JOB_CREATE, team: str | None = "ops", **fields: object
) -> AuditEntry:
    target = fields.pop("target", ("job", "j1", "backup"))
    return ACTOR.entry(action, fields.pop("at", START), team, target, **fields)  # type: ignore[arg-type]


async def everything(store: SqlStore, **filters: object) -> list[AuditEntry]:
    return (await store.list_audit(AuditQuery(limit=1000, **filters))).items  # type: ignore[arg-type]


def _service(store: SqlStore, clock: ManualClock) -> JobService:
    """A service whose operator allows plain credentials: the audit log must redact those it holds."""
    policy = TargetPolicy(allow_plain_credentials=True)
    return JobService(store, MemoryQueue(clock), ChangeFeed(), clock, policy)


# -- appending and reading ---------------------------------------------------------------------


async def test_entries_read_back_whole_newest_first_in_pages(store: SqlStore) -> None:
    written = [entry(at=at(n // 3), detail=f"n{n}") for n in range(7)]  # three share each instant
    await store.append_audit(written)
    first = await store.list_audit(AuditQuery(limit=3))
    assert first.next_cursor is not None
    second = await store.list_audit(AuditQuery(limit=3, cursor=first.next_cursor))
    third = await store.list_audit(AuditQuery(limit=3, cursor=second.next_cursor))
    assert third.next_cursor is None
    read = first.items + second.items + third.items
    assert read == sorted(written, key=lambda e: (e.at, e.id), reverse=True)  # every field back
    assert read[0].client == "192.0.2.7"
    assert read[0].actor_name == "deploy-bot"


async def test_filters_and_walls(store: SqlStore) -> None:
    await store.append_audit(
        [
            entry(AuditAction.JOB_CREATE, "ops", at=at(1)),
            entry(AuditAction.JOB_DELETE, "ops", at=at(2), target=("job", "j2", "cleanup")),
            entry(AuditAction.SECRET_SET, "billing", at=at(3), target=("secret", "billing/key", "key")),
            entry(AuditAction.AUTH_UNAUTHENTICATED, None, at=at(4), target=("request", "GET /v1/jobs", None)),
            Actor("token", "tok-2", "other", None).entry(AuditAction.TOKEN_CREATE, at(5), "ops", None),
        ]
    )
    assert len(await everything(store)) == 5  # every team's, and no team's
    walled = await everything(store, teams=("ops", "billing"))
    assert {e.team for e in walled} == {"ops", "billing"}  # the team-less entry is outside every wall
    assert [e.action for e in await everything(store, team="billing")] == [AuditAction.SECRET_SET]
    assert await everything(store, team="billing", teams=("ops",)) == []
    family = await everything(store, action="job")
    assert [e.action for e in family] == [AuditAction.JOB_DELETE, AuditAction.JOB_CREATE]
    assert len(await everything(store, action="job.delete")) == 1
    assert await everything(store, action="jo") == []  # a family is a whole word
    assert [e.actor_id for e in await everything(store, actor="tok-2")] == ["tok-2"]
    assert [e.target_id for e in await everything(store, target="cleanup")] == ["j2"]  # by name
    assert [e.target_name for e in await everything(store, target="billing/key")] == ["key"]  # by id
    assert [e.at for e in await everything(store, since=at(2), until=at(4))] == [at(3), at(2)]


async def test_a_bad_cursor_or_limit_is_refused(store: SqlStore) -> None:
    with pytest.raises(InvalidInputError):
        await store.list_audit(AuditQuery(cursor="bm90LWEtY3Vyc29y"))
    with pytest.raises(InvalidInputError):
        await store.list_audit(AuditQuery(limit=0))


async def test_prune_deletes_only_older_entries(store: SqlStore) -> None:
    await store.append_audit([entry(at=at(n)) for n in range(5)])
    assert await store.prune_audit(at(3)) == 3
    assert [e.at for e in await everything(store)] == [at(4), at(3)]
    assert await store.prune_audit(at(3)) == 0


# -- appended with the write they record --------------------------------------------------------


async def test_job_writes_record_redacted_snapshots(store: SqlStore, clock: ManualClock) -> None:
    service = _service(store, clock)
    target = HttpTarget(
        "https://user:hunter2@hooks.example.com/x?token=abc",
        headers=(("X-Api-Key", "Bearer plain-credential"), ("X-Key", SecretRef("api-key"))),
    )
    await store.put_secret(StoredSecret("ops", "api-key", "k1", b"\x01sealed"))
    job = await service.create(make_job(target=target, schedule="0 * * * *"), ACTOR)
    edited = await service.update(
        make_job(id=job.id, target=target, schedule="0 * * * *", description="v2"), None, ACTOR
    )
    await service.pause(job.id, "maintenance", actor=ACTOR)
    await service.resume(job.id, actor=ACTOR)
    await service.delete(job.id, ACTOR)

    entries = list(reversed(await everything(store)))
    assert [e.action for e in entries] == [
        AuditAction.JOB_CREATE, AuditAction.JOB_UPDATE, AuditAction.JOB_PAUSE,
        AuditAction.JOB_RESUME, AuditAction.JOB_DELETE,
    ]  # fmt: skip
    create, update, pause, resume, delete = entries
    assert (create.team, create.target_kind, create.target_id, create.target_name) == (
        "ops",
        "job",
        job.id,
        "backup",
    )
    assert create.before is None
    assert create.after is not None
    assert create.after["version"] == 1
    assert create.after["target"]["headers"] == [
        ["X-Api-Key", REDACTED],
        ["X-Key", {"secret": "api-key"}],
    ]
    assert "hunter2" not in create.after["target"]["url"]
    assert "abc" not in create.after["target"]["url"]
    assert update.before == create.after
    assert update.after is not None
    assert update.after["description"] == "v2"
    assert update.after["version"] == edited.version == 2
    assert pause.after is not None
    assert (pause.after["paused"], pause.after["pause_note"]) == (
        True,
        "maintenance",
    )
    assert resume.before == pause.after
    assert resume.after is not None
    assert resume.after["paused"] is False
    assert delete.before == resume.after
    assert delete.after is None
    text = json.dumps([(e.before, e.after) for e in entries])
    assert "plain-credential" not in text
    assert "hunter2" not in text


async def test_a_write_that_fails_or_changes_nothing_appends_nothing(
    store: SqlStore, clock: ManualClock
) -> None:
    service = _service(store, clock)
    job = await service.create(make_job(schedule="* * * * *", paused=True), ACTOR)
    clock.set(at(3.5))
    with failpoints.armed("store.before_skipped_runs=raise@1"), pytest.raises(failpoints.FailpointError):
        await service.resume(job.id, actor=ACTOR)
    with pytest.raises(ConflictError):
        await store.update_job(job, expected_version=7, audit=entry(AuditAction.JOB_UPDATE))
    await service.pause(job.id, "again", actor=ACTOR)  # paused already: nothing written
    assert [e.action for e in await everything(store)] == [AuditAction.JOB_CREATE]
    await service.resume(job.id, actor=ACTOR)
    resumed = (await everything(store, action="job.resume"))[0]
    assert resumed.detail == "3 slots missed while paused recorded SKIPPED"


async def test_a_trigger_is_recorded_once_per_run(store: SqlStore, clock: ManualClock) -> None:
    service = _service(store, clock)
    job = await service.create(make_job(), None)  # no actor: no entry
    run, created = await service.trigger(job.id, idempotency_key="k", actor=ACTOR)
    again, created_again = await service.trigger(job.id, idempotency_key="k", actor=ACTOR)
    assert (created, created_again, again.id) == (True, False, run.id)
    [trigger] = await everything(store)
    assert (trigger.action, trigger.target_id, trigger.after) == (
        AuditAction.JOB_TRIGGER, job.id, {"run_id": run.id, "idempotency_key": "k"},
    )  # fmt: skip
    manual = make_run(job, at(1), RunState.PENDING, kind=RunKind.MANUAL, idempotency_key="k2")
    await store.create_manual_run(manual)  # without an entry, as before
    assert len(await everything(store)) == 1


async def test_token_and_secret_writes_record_no_credential(store: SqlStore, clock: ManualClock) -> None:
    record, token_text = issue("ci", "ops", [Scope.READ], START)
    await store.create_token(record, audit=entry(AuditAction.TOKEN_CREATE, target=("token", record.id, "ci")))
    clock.set(at(1))
    await store.revoke_token(record.id, at(1), audit=entry(AuditAction.TOKEN_REVOKE, at=at(1)))
    await store.revoke_token(record.id, at(2), audit=entry(AuditAction.TOKEN_REVOKE, at=at(2)))  # already
    sealed = bytes(range(1, 40))
    await store.put_secret(
        StoredSecret("ops", "key", "k1", sealed), audit=entry(AuditAction.SECRET_SET, at=at(3))
    )
    await store.put_secret(
        StoredSecret("ops", "key", "k2", sealed), audit=entry(AuditAction.SECRET_SET, at=at(4))
    )
    await store.delete_secret("ops", "key", audit=entry(AuditAction.SECRET_DELETE, at=at(5)))

    created, revoked, first_set, second_set, deleted = reversed(await everything(store))
    public = {"id": record.id, "name": "ci", "team": "ops", "scopes": ["read"]}
    assert created.after == {**public, "expires_at": None, "revoked_at": None}
    assert revoked.before is not None
    assert revoked.before["revoked_at"] is None
    assert revoked.after is not None
    assert revoked.after["revoked_at"] == at(1).isoformat()
    assert first_set.before is None
    assert first_set.after is not None
    assert first_set.after["key_id"] == "k1"
    assert second_set.before == first_set.after
    assert second_set.after is not None
    assert second_set.after["key_id"] == "k2"
    assert deleted.before == second_set.after
    assert deleted.after is None
    logged = json.dumps([(e.before, e.after, e.detail) for e in await everything(store)])
    assert record.digest not in logged
    assert token_text not in logged
    assert token_text.removeprefix(PREFIX).partition("_")[2] not in logged  # the secret part, whole


async def test_concurrent_edits_record_a_chain_of_before_and_after(store: SqlStore) -> None:
    """Each edit's ``before`` is the row it changed (locked, on PostgreSQL), so the entries of
    edits racing on one job chain: every ``before`` is the ``after`` of the one before it."""
    job = await store.create_job(make_job(description="v0"))
    edits = [
        store.update_job(replace(job, description=f"v{n}"), None, audit=entry(AuditAction.JOB_UPDATE))
        for n in range(1, 9)
    ]
    await asyncio.gather(*edits)
    chain = sorted(await everything(store), key=lambda e: e.after["version"] if e.after else 0)
    assert [e.after["version"] for e in chain if e.after] == list(range(2, 10))
    previous = job_snapshot(job)
    for link in chain:
        assert link.before == previous
        previous = link.after
