"""``SqlStore``: the :class:`~cronwheel.store.port.Store` over SQLAlchemy Core (async), for SQLite
(embedded) and PostgreSQL (distributed) with one schema (:mod:`cronwheel.store.schema`).

Every method is one transaction. Writes that race are conditional (``UPDATE ... WHERE`` the state
the caller saw, ``INSERT ... ON CONFLICT DO NOTHING``) and read what they changed back with
``RETURNING``, so they stay correct on PostgreSQL under READ COMMITTED without explicit locks.
On SQLite, write transactions are also serialized per store by an ``asyncio.Lock`` (measured:
``tests/store/bench_sqlite_writes.py``; see :class:`SqlStore`) and begin with ``BEGIN IMMEDIATE``
(:mod:`cronwheel.store.driver`), so writers from other processes wait under ``busy_timeout``.

Cluster mode (PostgreSQL): every job write also sends ``pg_notify('cronwheel_jobs', job_id)`` in
its transaction (:mod:`cronwheel.store.change_listener` has the listener), and firing writes can be fenced
by shard lease epochs (``claim_shards``, ``fire(..., epochs=...)``; table ``shard_epochs``).

The package, by concern (``SqlStore`` is a facade over them):

* :mod:`~cronwheel.store.sql.jobs`: job definitions and lifecycle (create, edit, resume, delete);
* :mod:`~cronwheel.store.sql.firing`: the scheduler's side (due jobs, shard epochs, ``fire``);
* :mod:`~cronwheel.store.sql.leases`: the worker's side (queued stamps, claims, outcomes, cancels);
* :mod:`~cronwheel.store.sql.sweeps`: the backstop of at-least-once delivery;
* :mod:`~cronwheel.store.sql.runs`: reads of runs and their history;
* :mod:`~cronwheel.store.sql.upcoming`: live jobs grouped by what their fires depend on (the
  upcoming fires' read);
* :mod:`~cronwheel.store.sql.backfills`: backfills and the steps that record their runs;
* :mod:`~cronwheel.store.sql.tokens`: API tokens (digests, listing, revocation, last use);
* :mod:`~cronwheel.store.sql.secrets`: team secrets, sealed (the store never sees them in clear);
* :mod:`~cronwheel.store.sql.retention`: what retention reads and deletes (old runs, in batches);
* :mod:`~cronwheel.store.sql.last_runs`: each job's latest run and its state (``last_state``),
  written by the statements that change runs, as the last write of their transaction;
* :mod:`~cronwheel.store.sql.audit`: the audit log (appended in the transaction of the change it
  records, where there is one: every job, token and secret write takes an optional ``audit``);

over shared helpers: :mod:`~cronwheel.store.sql.tx` (connections, transactions, retries of lost
races, notifications), :mod:`~cronwheel.store.sql.where` (shared conditions and input checks) and
:mod:`~cronwheel.store.sql.bulk` (the fire path's batch statements). What differs between the
databases is decided in :mod:`cronwheel.store.driver` (:class:`~cronwheel.store.driver.Flavor`).

Open one with :func:`open_store`, which also migrates the schema to the newest revision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from cronwheel.audit import AuditEntry, AuditQuery
from cronwheel.auth.tokens import ApiToken
from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import PermanentError
from cronwheel.model import (
    Attempt,
    AttemptResult,
    Backfill,
    BackfillStep,
    Calendar,
    DueJob,
    Finish,
    FireGroup,
    FireResult,
    Firing,
    Job,
    LiveOutput,
    OutputChange,
    RetentionPolicy,
    Run,
    RunEvent,
    RunState,
)
from cronwheel.notifications.message import Delivery, Notification, Observation
from cronwheel.notifications.rules import Channel, Condition, Rule
from cronwheel.retention import HistoryBounds, RunStub
from cronwheel.store.driver import create_engine
from cronwheel.store.migrate import current_revision, head_revision, upgrade_engine
from cronwheel.store.port import JobQuery, Page, RunChange, RunQuery, RunSample, StoredSecret, TokenQuery
from cronwheel.store.sql import (
    armed,
    audit,
    backfills,
    calendars,
    cancels,
    firing,
    jobs,
    last_runs,
    leases,
    lite,
    live_output,
    retention,
    runs,
    secrets,
    sweeps,
    tokens,
    upcoming,
)
from cronwheel.store.sql import notifications as notices
from cronwheel.store.sql.firing import due_jobs_statement
from cronwheel.store.sql.tx import CHUNK, Transactions

__all__ = ["SchemaOutdatedError", "SqlStore", "due_jobs_statement", "open_store"]

# The step of ``claim_runs`` (one chunk in one transaction), looked up here at each call so that a
# test can make it lose a race (tests/store/test_store_availability.py).
_claim = leases.claim


class SchemaOutdatedError(PermanentError):
    """The database is not at the schema revision this cronwheel needs (run the migrations)."""


async def open_store(url: str, *, migrate: bool = True, clock: Clock | None = None) -> SqlStore:
    """Open the store at ``url`` (``sqlite:///path.db``, ``sqlite+aiosqlite:///path.db``,
    ``postgresql://...``). With ``migrate`` (the default) the schema is first brought to the
    newest revision (a no-op when it is there); without, a database at another revision is
    refused with :class:`SchemaOutdatedError`."""
    engine = create_engine(url)
    try:
        if migrate:
            await upgrade_engine(engine)
        else:
            current, head = await current_revision(engine), head_revision()
            if current != head:
                raise SchemaOutdatedError(f"the store is at schema revision {current}, not {head}")
    except BaseException:
        await engine.dispose()
        raise
    return SqlStore(engine, clock=clock)


class SqlStore:
    """The metadata store over an async SQLAlchemy engine (see the module docstring): each method
    is one call into the module of its concern.

    ``serialize_writes`` (default: on for SQLite, off otherwise) runs this store's write
    transactions one at a time under an ``asyncio.Lock``. SQLite allows one writer anyway; the
    lock makes writers wait in FIFO order on the event loop instead of in SQLite's busy handler,
    which sleeps and polls. Measured with ``tests/store/bench_sqlite_writes.py`` (16 concurrent
    writers): the same throughput (~300 write transactions/s on a 2-core VM), but p99 latency
    70-90 ms instead of ~830 ms and a worst case under 100 ms instead of 2-3 s, nowhere near
    ``busy_timeout``; without ``BEGIN IMMEDIATE`` (and without the lock) a third of the writes
    failed with "database is locked". Reads never take the lock (WAL readers do not block the
    writer).

    Choices the Protocol leaves open:

    * ``clock`` only fills ``created_at``/``updated_at`` that a caller left ``None``.
    * ``update_job`` and ``resume_job`` rewrite every field but id, ``created_at`` and
      ``deleted_at`` (the cursor ``next_run_at`` only with ``move_cursor``); ``delete_job`` also
      bumps ``version``, so in-flight firings of the job turn stale.
    * Worker-side transitions (``claim_run``, ``heartbeat``, ``finish_attempt``, ``fail_run``)
      return None for a missing run as for one in the wrong state; reads raise NotFoundError
      (``list_attempts``/``list_events`` too, for a missing run).
    * ``request_cancel`` (and ``delete_job(..., cancel_active=True)``) only flags unfinished runs
      (``cancel_requested``); it is not a state change, so it adds no ``RunEvent``.
    * On PostgreSQL, ``create_job``, ``update_job``, ``resume_job``, ``delete_job`` and
      ``record_skipped`` (when it inserted runs) notify channel ``cronwheel_jobs`` with each job
      id, in the writing transaction; ``fire`` does not (the cursor moves only under its owner,
      which knows).
    * Fencing: a refused firing of a job (deleted ones included) whose shard is not held is
      reported fenced, even if it is also stale; a job id the store has never seen is stale; a
      shard that ``claim_shards`` has never seen is not held.
    """

    def __init__(
        self, engine: AsyncEngine, *, clock: Clock | None = None, serialize_writes: bool | None = None
    ) -> None:
        self.engine = engine
        self._clock: Clock = clock or SystemClock()
        self._tx = Transactions(engine, serialize_writes)

    async def close(self) -> None:
        await self.engine.dispose()

    @property
    def write_concurrency(self) -> int:
        return self._tx.write_concurrency

    async def server_time(
        self, stamp: Callable[[], float], samples: int = 3
    ) -> list[tuple[float, datetime, float]]:
        return await self._tx.server_time(stamp, self._clock.now, samples)

    # -- jobs ------------------------------------------------------------------------------------

    async def create_job(
        self, job: Job, *, team_quota: int | None = None, audit: AuditEntry | None = None
    ) -> Job:
        return await jobs.create(self._tx, job, self._clock.now(), team_quota, audit)

    async def get_job(self, job_id: str) -> Job:
        return await jobs.get(self._tx, job_id)

    async def get_jobs(self, job_ids: Sequence[str]) -> dict[str, Job]:
        return await jobs.get_many(self._tx, job_ids)

    async def find_job(self, team: str, name: str) -> Job | None:
        return await jobs.find(self._tx, team, name)

    async def job_known(self, job_id: str) -> bool:
        return await jobs.known(self._tx, job_id)

    async def job_team(self, job_id: str) -> str | None:
        return await jobs.team_of(self._tx, job_id)

    async def list_jobs(self, query: JobQuery) -> Page[Job]:
        return await jobs.list_page(self._tx, query)

    async def update_job(
        self,
        job: Job,
        expected_version: int | None,
        *,
        move_cursor: bool = False,
        team_quota: int | None = None,
        audit: AuditEntry | None = None,
    ) -> Job:
        now = self._clock.now()
        return await jobs.edit(self._tx, job, expected_version, move_cursor, now, team_quota, audit)

    async def resume_job(
        self,
        job: Job,
        expected_version: int | None,
        skipped: Sequence[Run],
        now: datetime,
        *,
        move_cursor: bool,
        audit: AuditEntry | None = None,
    ) -> tuple[Job, list[Run]]:
        return await jobs.resume(self._tx, job, expected_version, skipped, move_cursor, now, audit)

    async def record_skipped(self, runs: Sequence[Run], now: datetime) -> list[Run]:
        return await jobs.record_skipped(self._tx, runs, now)

    async def delete_job(
        self, job_id: str, now: datetime, *, cancel_active: bool = False, audit: AuditEntry | None = None
    ) -> Job:
        return await jobs.mark_deleted(self._tx, job_id, now, cancel_active, audit)

    # -- scheduling ------------------------------------------------------------------------------

    async def due_jobs(
        self,
        until: datetime,
        shards: Sequence[int] | None = None,
        limit: int = 10_000,
        *,
        after: tuple[datetime, str] | None = None,
    ) -> list[DueJob]:
        return await firing.due_jobs(self._tx, until, shards, limit, after)

    async def claim_shards(self, leases: Mapping[int, int], node: str, now: datetime) -> set[int]:
        return await firing.claim_shards(self._tx, leases, node, now)

    async def shard_owners(self) -> dict[int, tuple[str, int]]:
        return await firing.shard_owners(self._tx)

    async def fire(
        self, firings: Sequence[Firing], now: datetime, epochs: Mapping[int, int] | None = None
    ) -> FireResult:
        """With ``epochs``, the transaction first reads (PostgreSQL: ``FOR SHARE``, which a
        concurrent ``claim_shards`` of those shards must wait for; SQLite: inside the one write
        transaction) which of ``epochs``' shards are still stored at the caller's epoch, and the
        cursor UPDATE only matches jobs in those shards (``jobs.shard IN (...)``). Only firings
        the UPDATE refused cost one more read, to tell fenced from stale. Pass the shards of the
        firings' jobs (or all shards held); a job whose shard is missing from ``epochs`` is
        fenced."""
        return await firing.fire(self._tx, firings, now, epochs)

    async def active_runs(self, job_ids: Sequence[str]) -> dict[str, list[Run]]:
        return await firing.active_runs(self._tx, job_ids)

    async def unreleased_runs(self, shards: Sequence[int] | None, limit: int = 100_000) -> list[Run]:
        return await armed.unreleased(self._tx, shards, limit)

    async def create_manual_run(self, run: Run, *, audit: AuditEntry | None = None) -> tuple[Run, bool]:
        return await firing.create_manual_run(self._tx, run, self._clock.now(), audit)

    # -- backfills -------------------------------------------------------------------------------

    async def create_backfill(self, backfill: Backfill, *, audit: AuditEntry | None = None) -> Backfill:
        return await backfills.create(self._tx, backfill, self._clock.now(), audit)

    async def cancel_backfill(
        self, backfill_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> Backfill:
        return await backfills.cancel(self._tx, backfill_id, now, audit)

    async def get_backfill(self, backfill_id: str) -> Backfill:
        return await backfills.get(self._tx, backfill_id)

    async def job_backfills(self, job_id: str, limit: int = 20) -> list[Backfill]:
        return await backfills.of_job(self._tx, job_id, limit)

    async def running_backfills(self, limit: int = 100) -> list[Backfill]:
        return await backfills.running(self._tx, limit)

    async def slots_with_runs(self, job_id: str, start: datetime, end: datetime) -> set[datetime]:
        return await backfills.slots_with_runs(self._tx, job_id, start, end)

    async def advance_backfill(self, step: BackfillStep, now: datetime) -> tuple[Backfill, list[Run]] | None:
        return await backfills.advance(self._tx, step, now)

    # -- runs ------------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> Run:
        return await runs.get(self._tx, run_id)

    async def get_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        return await runs.get_many(self._tx, run_ids)

    async def get_run_with_team(self, run_id: str) -> tuple[Run, str]:
        return await runs.get_with_team(self._tx, run_id)

    async def list_runs(self, query: RunQuery) -> Page[Run]:
        return await runs.list_page(self._tx, query)

    async def count_runs(self, states: Sequence[RunState]) -> dict[RunState, int]:
        return await runs.count(self._tx, states)

    async def list_attempts(self, run_id: str) -> list[Attempt]:
        return await runs.list_attempts(self._tx, run_id)

    async def list_events(self, run_id: str) -> list[RunEvent]:
        return await runs.list_events(self._tx, run_id)

    async def last_runs(self, job_ids: Sequence[str]) -> dict[str, Run]:
        return await runs.last_runs(self._tx, job_ids)

    async def recent_runs(self, job_ids: Sequence[str], per_job: int) -> dict[str, list[RunSample]]:
        return await runs.recent(self._tx, job_ids, per_job)

    async def run_changes(self, after: int | None, limit: int) -> list[RunChange]:
        return await runs.changes(self._tx, after, limit)

    async def output_changes(self, run_ids: Sequence[str]) -> list[OutputChange]:
        return await live_output.changes(self._tx, run_ids) if run_ids else []

    async def fire_lateness(self, since: datetime, limit: int) -> list[int]:
        return await runs.fire_lateness(self._tx, since, limit)

    async def fire_groups(self, teams: Sequence[str] | None) -> list[FireGroup]:
        return await upcoming.fire_groups(self._tx, teams)

    # -- workers ---------------------------------------------------------------------------------

    async def mark_queued(self, run_ids: Sequence[str], now: datetime) -> None:
        if run_ids:
            await leases.mark_queued(self._tx, run_ids, now)

    async def claim_run(self, run_id: str, worker: str, now: datetime, lease_until: datetime) -> Run | None:
        return (await self.claim_runs([run_id], worker, now, lease_until)).get(run_id)

    async def claim_runs(
        self, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
    ) -> dict[str, Run]:
        claimed = await self.claim_runs_with_jobs(run_ids, worker, now, lease_until)
        return {run_id: run for run_id, (run, _) in claimed.items()}

    async def claim_runs_with_jobs(
        self, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
    ) -> dict[str, tuple[Run, Job | None]]:
        if not run_ids:
            return {}
        ids = sorted(set(run_ids))  # id order: one lock order
        if self._tx.flavor.in_process:  # the whole transaction on the driver's thread
            return await lite.claim(self._tx, ids, worker, now, lease_until)
        if self._tx.statements_commit_alone and len(ids) <= CHUNK:  # one statement, one round trip
            return await self._tx.write_alone(
                lambda connection: _claim(connection, ids, worker, now, lease_until, noted=True)
            )
        return await self._tx.write_batches(
            ids,
            lambda connection, chunk: _claim(connection, chunk, worker, now, lease_until),
            then=last_runs.record_claimed,
        )

    async def heartbeat(self, run_id: str, attempt: int, worker: str, lease_until: datetime) -> Run | None:
        return await leases.heartbeat(self._tx, run_id, attempt, worker, lease_until)

    async def write_outputs(self, outputs: Sequence[LiveOutput], worker: str, now: datetime) -> set[str]:
        return await live_output.write(self._tx, outputs, worker, now) if outputs else set()

    async def finish_attempt(
        self,
        run_id: str,
        attempt: int,
        worker: str,
        result: AttemptResult,
        now: datetime,
        next_attempt_at: datetime | None,
    ) -> Run | None:
        finish = Finish(run_id, attempt, result, next_attempt_at)
        return (await self.finish_attempts([finish], worker, now)).get(run_id)

    async def finish_attempts(self, finishes: Sequence[Finish], worker: str, now: datetime) -> dict[str, Run]:
        """The outcomes in one write (see :func:`leases.finish`); where that write commits alone,
        the successes it spared (that delete their job) follow in a transaction of their own."""
        if not finishes:
            return {}
        unique = leases.unique_finishes(finishes)  # id order: one lock order
        if self._tx.flavor.in_process:  # the whole transaction on the driver's thread
            recorded = await lite.finish(self._tx, unique, worker, now)
        elif self._tx.statements_commit_alone and len(unique) <= CHUNK:  # one statement, one round trip
            recorded = await self._tx.write_alone(
                lambda connection: leases.finish(connection, unique, worker, now, noted=True)
            )
        else:
            return await self._finish_in_transaction(unique, worker, now)
        spared = leases.spared(unique, recorded)
        if spared:
            recorded.update(await self._finish_in_transaction(spared, worker, now))
        return recorded

    async def _finish_in_transaction(
        self, finishes: Sequence[Finish], worker: str, now: datetime
    ) -> dict[str, Run]:
        return await self._tx.write_batches(
            finishes,
            lambda connection, chunk: leases.finish(connection, chunk, worker, now),
            then=last_runs.record_found,
        )

    async def request_cancel(self, run_ids: Sequence[str], now: datetime) -> None:
        if run_ids:
            async with self._tx.write() as connection:
                await cancels.request_cancel(connection, run_ids)

    async def cancel_requested(self, run_ids: Sequence[str]) -> set[str]:
        return await cancels.cancel_requested(self._tx, run_ids)

    async def fail_run(self, run_id: str, reason: str, now: datetime) -> Run | None:
        return await leases.fail(self._tx, run_id, reason, now)

    # -- retention (cronwheel.retention decides; store/sql/retention.py reads and deletes) --------

    async def retention_jobs(
        self, after: str | None = None, limit: int = 500
    ) -> list[tuple[str, RetentionPolicy | None]]:
        return await retention.job_policies(self._tx, after, limit)

    async def history_bounds(self, job_id: str, keep_runs: int | None) -> HistoryBounds:
        return await retention.history_bounds(self._tx, job_id, keep_runs)

    async def oldest_runs(
        self, job_id: str, after: tuple[datetime, str] | None = None, limit: int = 500
    ) -> list[RunStub]:
        return await retention.oldest_runs(self._tx, job_id, after, limit)

    async def purge_runs(self, run_ids: Sequence[str]) -> int:
        return await retention.purge(self._tx, run_ids)

    # -- calendars -------------------------------------------------------------------------------

    async def create_calendar(self, calendar: Calendar, *, audit: AuditEntry | None = None) -> Calendar:
        return await calendars.create(self._tx, calendar, self._clock.now(), audit)

    async def get_calendar(self, team: str, name: str) -> Calendar:
        return await calendars.get(self._tx, team, name)

    async def list_calendars(self, team: str, limit: int = 100, cursor: str | None = None) -> Page[Calendar]:
        return await calendars.list_page(self._tx, team, limit, cursor)

    async def update_calendar(
        self, calendar: Calendar, expected_version: int | None = None, *, audit: AuditEntry | None = None
    ) -> tuple[Calendar, list[str]]:
        return await calendars.edit(self._tx, calendar, expected_version, self._clock.now(), audit)

    async def delete_calendar(self, team: str, name: str, *, audit: AuditEntry | None = None) -> Calendar:
        return await calendars.remove(self._tx, team, name, audit)

    # -- secrets ---------------------------------------------------------------------------------

    async def put_secret(
        self, secret: StoredSecret, *, audit: AuditEntry | None = None
    ) -> tuple[StoredSecret, bool]:
        return await secrets.put(self._tx, secret, self._clock.now(), audit)

    async def get_secrets(self, team: str, names: Sequence[str]) -> dict[str, StoredSecret]:
        return await secrets.get_many(self._tx, team, names) if names else {}

    async def list_secrets(
        self, team: str, limit: int = 100, cursor: str | None = None
    ) -> Page[StoredSecret]:
        return await secrets.list_page(self._tx, team, limit, cursor)

    async def delete_secret(self, team: str, name: str, *, audit: AuditEntry | None = None) -> StoredSecret:
        return await secrets.remove(self._tx, team, name, audit)

    async def secrets_to_rekey(
        self, key_id: str, after: tuple[str, str] | None = None, limit: int = 100
    ) -> list[StoredSecret]:
        return await secrets.to_rekey(self._tx, key_id, after, limit)

    async def rekey_secret(self, secret: StoredSecret, key_id: str, value: bytes) -> bool:
        return await secrets.rekey(self._tx, secret, key_id, value)

    # -- sweeps ----------------------------------------------------------------------------------

    async def runs_to_dispatch(
        self,
        now: datetime,
        queued_before: datetime,
        limit: int = 1000,
        *,
        unqueued_before: datetime | None = None,
    ) -> list[Run]:
        return await sweeps.runs_to_dispatch(self._tx, now, queued_before, limit, unqueued_before)

    async def expire_leases(
        self, now: datetime, limit: int = 1000, *, expired_before: datetime | None = None
    ) -> list[Run]:
        return await sweeps.expire_leases(
            self._tx, now, limit, now if expired_before is None else expired_before
        )

    # -- API tokens ------------------------------------------------------------------------------

    async def create_token(self, token: ApiToken, *, audit: AuditEntry | None = None) -> ApiToken:
        return await tokens.create(self._tx, token, audit)

    async def get_token(self, token_id: str) -> ApiToken:
        return await tokens.get(self._tx, token_id)

    async def list_tokens(self, query: TokenQuery) -> Page[ApiToken]:
        return await tokens.list_page(self._tx, query)

    async def revoke_token(
        self, token_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> ApiToken:
        return await tokens.revoke(self._tx, token_id, now, audit)

    async def touch_token(self, token_id: str, now: datetime, stale_before: datetime) -> bool:
        return await tokens.touch(self._tx, token_id, now, stale_before)

    # -- audit log -------------------------------------------------------------------------------

    async def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        await audit.append(self._tx, entries)

    async def list_audit(self, query: AuditQuery) -> Page[AuditEntry]:
        return await audit.list_page(self._tx, query)

    async def prune_audit(self, before: datetime) -> int:
        return await audit.prune(self._tx, before)

    # -- notifications ---------------------------------------------------------------------------

    async def notification_rules(self, scope: str) -> tuple[Rule, ...] | None:
        return await notices.get_rules(self._tx, scope)

    async def set_notification_rules(
        self,
        scope: str,
        team: str,
        job_id: str | None,
        rules: tuple[Rule, ...],
        *,
        audit: AuditEntry | None = None,
    ) -> None:
        await notices.put_rules(self._tx, scope, team, job_id, rules, self._clock.now(), audit)

    async def delete_notification_rules(self, scope: str, *, audit: AuditEntry | None = None) -> bool:
        return await notices.delete_rules(self._tx, scope, audit)

    async def process_notification_inbox(self, now: datetime, limit: int = 500) -> int:
        return await notices.process_inbox(self._tx, now, limit)

    async def watched_jobs(self, condition: Condition) -> list[tuple[Job, tuple[Rule, ...]]]:
        return await notices.watching(self._tx, condition)

    async def terminal_slots(self, slots: Sequence[tuple[str, datetime]]) -> set[tuple[str, datetime]]:
        return await notices.terminal_slots(self._tx, slots)

    async def record_observations(self, observations: Sequence[Observation], now: datetime) -> int:
        return await notices.record(self._tx, observations, now)

    async def enqueue_notification(
        self, notification: Notification, channels: Sequence[Channel], now: datetime
    ) -> int:
        return await notices.enqueue(self._tx, notification, channels, now)

    async def due_deliveries(self, now: datetime, limit: int = 100) -> list[Delivery]:
        return await notices.due(self._tx, now, limit)

    async def mark_delivered(
        self, delivery_id: str, now: datetime, error: str | None = None, retry_at: datetime | None = None
    ) -> None:
        await notices.delivered(self._tx, delivery_id, now, error, retry_at)

    async def prune_deliveries(self, before: datetime) -> int:
        return await notices.prune(self._tx, before)

    async def outbox(self, job_id: str | None = None) -> list[dict[str, Any]]:
        return await notices.outbox(self._tx, job_id)
