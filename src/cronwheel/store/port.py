"""The store's ports, one ``Protocol`` per role, with their contracts in the docstrings, and the
small records their methods take and return.

Each role holds only the port it uses: the scheduler :class:`FiringStore`, the worker
:class:`LeaseStore`, the sweeper :class:`SweepStore`, the backfiller :class:`BackfillStore`, the
purger :class:`PurgeStore`, the job service :class:`JobStore`, secrets :class:`SecretStore`,
tokens :class:`TokenStore`, the notifier :class:`NoticeStore`, the API's reads :class:`RunReads`
and :class:`ClusterReads`. :class:`Store` is all of them: what a backend
(:class:`cronwheel.store.sql.SqlStore`) implements and the contract suite (``tests/store``) runs
against SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from cronwheel.audit import AuditEntry, AuditQuery
from cronwheel.auth.tokens import ApiToken
from cronwheel.errors import ConflictError, FieldRefusedError
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

T = TypeVar("T")


class UnknownCalendarError(FieldRefusedError):
    """A job lists calendars its team does not have (422)."""

    slug = "calendar-not-found"
    title = "Unknown calendar"

    def __init__(self, team: str, missing: Sequence[str]) -> None:
        names = ", ".join(repr(name) for name in missing)
        super().__init__(
            "calendars",
            f"team {team!r} has no calendar named {names}; create it first: "
            f"cronwheel calendars create {team}/{missing[0]}",
            "calendar_not_found",
        )


class CalendarInUseError(ConflictError):
    """A calendar that live jobs still list (409, naming them in ``jobs``)."""

    def __init__(self, team: str, name: str, job_names: Sequence[str]) -> None:
        self.jobs = list(job_names)
        shown = ", ".join(job_names[:20]) + (" ..." if len(job_names) > 20 else "")
        super().__init__(
            f"calendar {name!r} of team {team!r} is listed by {len(job_names)} job(s): {shown}; "
            "remove it from their calendars first"
        )


MAX_LOST_ATTEMPTS = 5  # a run whose workers died this often is FAILED, not retried forever


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None = None  # opaque; pass back to get the next page


@dataclass(frozen=True, slots=True)
class JobQuery:
    team: str | None = None
    # Only jobs of these teams (None: every team): the caller's walls (guarantee 8), applied in
    # the query itself so that pages are full pages of what the caller may see.
    teams: tuple[str, ...] | None = None
    labels: tuple[tuple[str, str], ...] = ()  # every pair must match
    paused: bool | None = None
    last_state: RunState | None = None  # state of the job's most recent run
    # Only late jobs: not paused, with a slot before this instant not fired yet (next_run_at
    # earlier). The API passes its clock's now minus a grace (cronwheel.lateness).
    late_before: datetime | None = None
    name: str | None = None
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class RunSample:
    """What a sparkline shows of one run: its slot, state, fire lateness (queued - slot) and
    duration (finished - started), in microseconds (None while unknown)."""

    job_id: str
    slot: datetime
    state: RunState
    lateness_us: int | None
    duration_us: int | None


@dataclass(frozen=True, slots=True)
class RunChange:
    """One entry of a run's history as a live page hears of it: the event's id (its place in
    ``run_events``), the run, its job and that job's team (live or deleted), the state entered."""

    event_id: int
    run_id: str
    job_id: str
    team: str
    state: RunState


@dataclass(frozen=True, slots=True)
class RunQuery:
    job_id: str | None = None
    teams: tuple[str, ...] | None = None  # only runs of jobs (live or deleted) of these teams
    states: tuple[RunState, ...] = ()
    team: str | None = None  # only runs of this team's jobs (within ``teams``)
    reasons: tuple[str, ...] = ()  # only runs with one of these reasons (SkipReason values)
    since: datetime | None = None  # only slots at or after this instant
    until: datetime | None = None  # only slots before this instant
    late: bool = False  # only runs started over lateness.LATE_START after they were due
    limit: int = 100
    cursor: str | None = None  # newest first


@dataclass(frozen=True, slots=True)
class TokenQuery:
    team: str | None = None  # only this team's tokens
    # Only tokens of these teams (None: every token, those of every team included); tokens of
    # every team (team None) are listed only when this is None.
    teams: tuple[str, ...] | None = None
    include_revoked: bool = False
    limit: int = 100
    cursor: str | None = None  # oldest first


@dataclass(frozen=True, slots=True)
class StoredSecret:
    """A team secret as the store keeps it: sealed by :mod:`cronwheel.secrets.crypto` (the store
    never sees a value in clear), with the id of the key that sealed it."""

    team: str
    name: str
    key_id: str
    value: bytes = field(repr=False)
    created_at: datetime | None = None
    updated_at: datetime | None = None


class JobReads(Protocol):
    """Jobs as every reader sees them: one, many, by name, a page. A deleted job is absent from
    these reads but stays known (:meth:`job_known`, :meth:`job_team`): its runs stay readable."""

    async def get_job(self, job_id: str) -> Job: ...

    async def get_jobs(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """The live jobs among ``job_ids``, by id, in one read (deleted or unknown ones are absent)."""
        ...

    async def find_job(self, team: str, name: str) -> Job | None: ...

    async def job_known(self, job_id: str) -> bool:
        """Whether ``job_id`` names a job this store holds, live or deleted (a deleted job's runs
        stay readable, so its id stays known); an id never created is not."""
        ...

    async def job_team(self, job_id: str) -> str | None:
        """The team of the job ``job_id``, live or deleted (a deleted job's runs stay readable,
        and stay its team's); None for an id never created."""
        ...

    async def list_jobs(self, query: JobQuery) -> Page[Job]: ...


class Queueing(Protocol):
    """Handing recorded runs to the queue: each run is marked queued once its trigger is sent."""

    async def mark_queued(self, run_ids: Sequence[str], now: datetime) -> None:
        """Stamp ``queued_at`` = ``now`` (their triggers are on the queue) on the runs that are
        PENDING or RETRYING, and on those never stamped whatever their state: a worker may claim
        a run, even finish it, before its scheduler stamps it, and the first queueing still
        happened. A run already stamped and no longer claimable keeps its stamp."""
        ...


class JobStore(JobReads, Queueing, Protocol):
    """What the job service writes: jobs, their manual runs and cancellations, each one
    transaction with its audit entry."""

    async def create_job(
        self, job: Job, *, team_quota: int | None = None, audit: AuditEntry | None = None
    ) -> Job:
        """Store a new job; with ``team_quota``, only while its team has fewer live jobs."""
        ...

    async def update_job(
        self,
        job: Job,
        expected_version: int | None,
        *,
        move_cursor: bool = False,
        team_quota: int | None = None,
        audit: AuditEntry | None = None,
    ) -> Job:
        """Store ``job`` (matched by id) with ``version`` = stored version + 1. The scheduler's
        cursor ``next_run_at`` is left as stored unless ``move_cursor`` (the timing changed): an
        edit that read the job before a fire must not move the cursor back. A job moved to
        another team counts against that team's ``team_quota``.

        In the same transaction the job's armed runs (PENDING, never queued) whose slot is still
        ahead are deleted and, unless ``move_cursor``, the cursor moves back to the first of
        them: the new version (or the pause) decides that slot again. The same holds for
        :meth:`resume_job` and :meth:`delete_job`."""
        ...

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
        """Resume a paused job in one transaction: store ``job`` (which must not be paused) as
        :meth:`update_job` does, and insert the ``skipped`` runs (SKIPPED, of this job: its
        slots missed while paused) as :meth:`record_skipped` does. Both or neither: a resumed
        job without the records of its paused slots would be a silent miss (guarantee 2).
        Returns the stored job and the runs inserted (a slot already recorded is left alone)."""
        ...

    async def delete_job(
        self, job_id: str, now: datetime, *, cancel_active: bool = False, audit: AuditEntry | None = None
    ) -> Job:
        """Mark the live job deleted (``NotFoundError`` if there is none). With
        ``cancel_active``, its unfinished runs (PENDING, RUNNING, RETRYING) are flagged to stop
        (as :meth:`request_cancel` does) in the same transaction: a job is never deleted while
        its runs were not told."""
        ...

    async def create_manual_run(self, run: Run, *, audit: AuditEntry | None = None) -> tuple[Run, bool]:
        """Insert a manual run; if one with the same (job, idempotency key) exists, return it
        and False (and ``audit`` is not appended)."""
        ...

    async def request_cancel(self, run_ids: Sequence[str], now: datetime) -> None: ...


class ActiveRuns(Protocol):
    """What overlap policies read: the runs of a job that have not finished."""

    async def active_runs(self, job_ids: Sequence[str]) -> dict[str, list[Run]]:
        """Non-terminal runs of each job (for overlap policies)."""
        ...


class FiringStore(JobReads, Queueing, ActiveRuns, Protocol):
    """The scheduler's port: due jobs, shard fencing and the conditional fire that records runs
    (guarantee 1: the store decides)."""

    @property
    def write_concurrency(self) -> int:
        """How many write transactions are worth running at once: a database that writes one
        transaction at a time (SQLite) says 1, one that runs them side by side says more (the
        scheduler keeps this many fire batches in flight)."""
        ...

    async def due_jobs(
        self,
        until: datetime,
        shards: Sequence[int] | None = None,
        limit: int = 10_000,
        *,
        after: tuple[datetime, str] | None = None,
    ) -> list[DueJob]:
        """Live, unpaused jobs with ``next_run_at <= until`` (in ``shards`` if given), soonest
        first (by ``next_run_at``, then id), at most ``limit``: page on with ``after`` = the
        last job's (``next_run_at``, id). Each as the scheduler's slim :class:`DueJob`, equal to
        ``DueJob.of(get_job(id))``."""
        ...

    async def claim_shards(self, leases: Mapping[int, int], node: str, now: datetime) -> set[int]:
        """Record that ``node`` holds each shard of ``leases`` (shard -> lease epoch): a shard's
        stored epoch becomes the given one if that is not older than the stored one (or none is
        stored). Returns the shards now stored at exactly the given epoch; a shard missing from
        the result has a newer owner and must not be fired. Claiming again at the same epoch is
        harmless (call it after every lease change)."""
        ...

    async def fire(
        self, firings: Sequence[Firing], now: datetime, epochs: Mapping[int, int] | None = None
    ) -> FireResult:
        """Apply ``firings`` (see the class docstring). With ``epochs`` (shard -> lease epoch of
        the caller), a firing is applied only if its job's shard is stored in ``claim_shards`` at
        exactly that epoch; the others are reported in ``fenced_job_ids`` (not stale) and write
        nothing. ``epochs=None`` (embedded: one process owns every shard) skips the check."""
        ...

    async def unreleased_runs(self, shards: Sequence[int] | None, limit: int = 100_000) -> list[Run]:
        """The armed runs (scheduled, PENDING, never queued) of jobs in ``shards`` (None: all),
        oldest slot first: what a scheduler gaining those shards must release at their slots."""
        ...

    async def record_skipped(self, runs: Sequence[Run], now: datetime) -> list[Run]:
        """Insert SKIPPED runs (slots missed while paused) that do not exist yet; returns those
        inserted. Existing (job, slot) runs are left alone."""
        ...


class BackfillStore(JobReads, Queueing, ActiveRuns, Protocol):
    """Backfills: the job service accepts them, the backfiller carries them through a step at a
    time, the API reads their progress. A slot gets at most one run whoever records it (the
    (job, slot) key of guarantee 1: "already exists" is success, counted as ``existing``)."""

    async def create_backfill(self, backfill: Backfill, *, audit: AuditEntry | None = None) -> Backfill:
        """Store a new backfill of a live job (``NotFoundError`` otherwise), with ``audit``, in
        one transaction; ``created_at``/``updated_at`` left None are the store's now."""
        ...

    async def get_backfill(self, backfill_id: str) -> Backfill: ...

    async def cancel_backfill(
        self, backfill_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> Backfill:
        """End a running backfill ``cancelled`` (its cursor None), with ``audit``, in one
        transaction that a concurrent :meth:`advance_backfill` waits for or precedes: no run is
        recorded for it afterwards; the runs recorded before stay. One that is no longer running
        is refused with :class:`~cronwheel.errors.NotRunningError` (nothing written)."""
        ...

    async def job_backfills(self, job_id: str, limit: int = 20) -> list[Backfill]:
        """The job's backfills, newest first."""
        ...

    async def running_backfills(self, limit: int = 100) -> list[Backfill]:
        """The backfills still running, oldest first."""
        ...

    async def slots_with_runs(self, job_id: str, start: datetime, end: datetime) -> set[datetime]:
        """The slots in [``start``, ``end``] of the job that hold a run keyed by its slot
        (scheduled, skipped or backfilled; a manual run holds none)."""
        ...

    async def advance_backfill(self, step: BackfillStep, now: datetime) -> tuple[Backfill, list[Run]] | None:
        """Apply ``step`` in one transaction: insert its runs (a slot that has a run keeps it),
        move the cursor, add to ``created`` the runs inserted and to ``existing`` the others, and
        end the backfill ``done`` when ``next_cursor`` is None. Returns the backfill as stored and
        the runs inserted (to be queued), or None when the backfill is not running at
        ``expected_cursor`` any more (nothing written). A backfill whose job was deleted ends
        ``cancelled`` instead, recording nothing."""
        ...


class LeaseStore(JobReads, Protocol):
    """The worker's port: claim runs, hold their leases, record attempts and their outcomes."""

    async def get_runs(self, run_ids: Sequence[str]) -> dict[str, Run]:
        """The runs among ``run_ids``, by id, in one read (unknown ones are absent)."""
        ...

    async def claim_run(self, run_id: str, worker: str, now: datetime, lease_until: datetime) -> Run | None:
        """PENDING/RETRYING (due) -> RUNNING with a new attempt; None if not claimable."""
        ...

    async def claim_runs(
        self, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
    ) -> dict[str, Run]:
        """:meth:`claim_run` for many runs in one transaction (a worker claims what one receive
        handed it): the runs claimed, by id; the others (unknown, taken, finished, not due yet)
        are absent. Each claimed run gets its attempt and its RUNNING event, as with claim_run."""
        ...

    async def claim_runs_with_jobs(
        self, run_ids: Sequence[str], worker: str, now: datetime, lease_until: datetime
    ) -> dict[str, tuple[Run, Job | None]]:
        """:meth:`claim_runs`, each claimed run with its job as :meth:`get_jobs` reads it (None:
        the job was deleted), in the same call: what a worker needs to start the attempts."""
        ...

    async def heartbeat(self, run_id: str, attempt: int, worker: str, lease_until: datetime) -> Run | None:
        """Extend the lease; None if this worker no longer holds it. The returned run says
        whether cancellation was requested."""
        ...

    async def write_outputs(self, outputs: Sequence[LiveOutput], worker: str, now: datetime) -> set[str]:
        """Write the output so far of running attempts into their records (``output``, up to
        64 KiB, and ``output_at`` = ``now``), in one transaction: only those whose run ``worker``
        holds at that attempt (a stale worker writes nothing). The run ids written. The
        attempt's final record replaces what this wrote."""
        ...

    async def finish_attempt(
        self,
        run_id: str,
        attempt: int,
        worker: str,
        result: AttemptResult,
        now: datetime,
        next_attempt_at: datetime | None,
    ) -> Run | None:
        """Record the attempt's outcome and move the run to SUCCESS, RETRYING (when
        ``next_attempt_at`` is given) or FAILED; None if the lease was lost. The SUCCESS of a
        slot run (scheduled or backfill) of a job with ``delete_after_success`` deletes the job,
        as ``delete_job(cancel_active=True)`` does, in the same transaction."""
        ...

    async def finish_attempts(self, finishes: Sequence[Finish], worker: str, now: datetime) -> dict[str, Run]:
        """:meth:`finish_attempt` for many attempts of ``worker`` in one transaction (the
        successes that delete their job may take a second one: a run's outcome and its job's
        deletion are always in the same): the runs recorded, by id; a run whose lease this
        worker lost (or named twice) is absent."""
        ...

    async def cancel_requested(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` were asked to stop (one cheap read for all of a worker's attempts)."""
        ...

    async def fail_run(self, run_id: str, reason: str, now: datetime) -> Run | None:
        """PENDING/RETRYING -> FAILED without an attempt (job deleted, cancelled)."""
        ...


class SweepStore(JobReads, Queueing, Protocol):
    """The sweeper's port, the store-side backstop of at-least-once delivery: runs whose trigger
    was never sent, and leases whose worker went silent."""

    async def runs_to_dispatch(
        self,
        now: datetime,
        queued_before: datetime,
        limit: int = 1000,
        *,
        unqueued_before: datetime | None = None,
    ) -> list[Run]:
        """PENDING runs queued before ``queued_before`` or never queued (when ``unqueued_before``
        is given: only those created before it and whose slot is not after it, so a run whose
        scheduler is publishing it right now, or an armed run whose slot is ahead, is left to
        its scheduler), and RETRYING runs whose ``next_attempt_at`` has come."""
        ...

    async def expire_leases(
        self, now: datetime, limit: int = 1000, *, expired_before: datetime | None = None
    ) -> list[Run]:
        """RUNNING runs whose lease expired: their attempt is recorded LOST and the run goes to
        RETRYING, due now (a crash is not the target's fault, so this does not use the retry
        budget), or to FAILED once it has lost ``MAX_LOST_ATTEMPTS`` attempts. Returns the runs
        changed. ``expired_before`` (default ``now``) moves the cutoff: a process that knows every
        lease is orphaned (embedded restart) expires them all at once."""
        ...


class PurgeStore(Protocol):
    """The purger's port: :mod:`cronwheel.retention` decides what goes; the store reads and deletes."""

    async def retention_jobs(
        self, after: str | None = None, limit: int = 500
    ) -> list[tuple[str, RetentionPolicy | None]]:
        """Every job, live or deleted, by id after ``after``, with its own retention policy."""
        ...

    async def history_bounds(self, job_id: str, keep_runs: int | None) -> HistoryBounds:
        """The key of the job's ``keep_runs``-th newest run and its latest run of each terminal
        state (see :class:`~cronwheel.retention.HistoryBounds`)."""
        ...

    async def oldest_runs(
        self, job_id: str, after: tuple[datetime, str] | None = None, limit: int = 500
    ) -> list[RunStub]:
        """The job's runs oldest first (slot, then id) after the key ``after``, at most ``limit``."""
        ...

    async def purge_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the terminal runs among ``run_ids`` with their attempts and events, in short
        write transactions of at most 500 runs (a run that is not terminal stays); how many."""
        ...


class RunReads(Protocol):
    """Runs, attempts and events as the API and the dashboard read them."""

    async def get_run(self, run_id: str) -> Run: ...

    async def get_run_with_team(self, run_id: str) -> tuple[Run, str]:
        """The run and its job's team (the job live or deleted), in one read: what an API read
        of one run needs to decide whether the caller may see it (``NotFoundError`` if none)."""
        ...

    async def list_runs(self, query: RunQuery) -> Page[Run]: ...

    async def list_attempts(self, run_id: str) -> list[Attempt]: ...

    async def list_events(self, run_id: str) -> list[RunEvent]: ...

    async def last_runs(self, job_ids: Sequence[str]) -> dict[str, Run]:
        """Each job's most recent run (by slot), for job summaries."""
        ...

    async def recent_runs(self, job_ids: Sequence[str], per_job: int) -> dict[str, list[RunSample]]:
        """Each job's ``per_job`` most recent runs (by slot), oldest first, for sparklines: one
        statement for a page of jobs (jobs without runs are absent)."""
        ...

    async def output_changes(self, run_ids: Sequence[str]) -> list[OutputChange]:
        """The output so far of the running attempts of ``run_ids`` (those with one written by
        :meth:`LeaseStore.write_outputs`), in one read: what live pages of those runs show."""
        ...

    async def run_changes(self, after: int | None, limit: int) -> list[RunChange]:
        """The run events whose id is above ``after``, lowest id first, at most ``limit``; with
        ``after`` None, none but the newest (an empty list without events): where to start
        following from. One indexed read, whatever the history holds."""
        ...


class ClusterReads(Protocol):
    """What the cluster page and the live gauges read: shard owners, runs by state, fire lateness."""

    async def shard_owners(self) -> dict[int, tuple[str, int]]:
        """Each claimed shard's (node, epoch) as last recorded by ``claim_shards`` (cluster
        status; the coordinator, not this table, says who holds a lease now)."""
        ...

    async def count_runs(self, states: Sequence[RunState]) -> dict[RunState, int]:
        """How many runs are in each of ``states`` (states without runs are left out)."""
        ...

    async def fire_lateness(self, since: datetime, limit: int) -> list[int]:
        """The fire lateness (queued_at - slot, microseconds) of the newest scheduled runs with a
        slot at or after ``since`` that were queued: at most ``limit`` of them."""
        ...


class UpcomingReads(Protocol):
    """What the upcoming fires count: live jobs grouped by what their fires depend on."""

    async def fire_groups(self, teams: Sequence[str] | None) -> list[FireGroup]:
        """The live, unpaused, not complete jobs (those ``due_jobs`` reads) of ``teams`` (None:
        every team), grouped in the store: one :class:`FireGroup` per team and distinct
        expression, zone, DST options, bounds and calendars with its count; a job with a jitter
        window, or whose expression ``schedule.may_hash``, alone (a group of one naming it)."""
        ...


class AuditWriter(Protocol):
    """Appending audit entries that record no store write of their own."""

    async def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append entries that record no store write (refusals, re-encryption's summary)."""
        ...


class SecretReader(Protocol):
    """What resolving a run's secret references reads: sealed values, never in clear."""

    async def get_secrets(self, team: str, names: Sequence[str]) -> dict[str, StoredSecret]:
        """The secrets of ``team`` among ``names``, by name, in one read (unknown ones are absent)."""
        ...


class SecretStore(SecretReader, AuditWriter, Protocol):
    """Sealed team secrets: :mod:`cronwheel.secrets` seals and opens them, the store only keeps them."""

    async def put_secret(
        self, secret: StoredSecret, *, audit: AuditEntry | None = None
    ) -> tuple[StoredSecret, bool]:
        """Create the secret (team, name), or replace its key id and value keeping its
        ``created_at``; ``updated_at`` (and a new secret's ``created_at``) is the secret's, or
        now when None. Returns the stored secret and whether it was created."""
        ...

    async def list_secrets(
        self, team: str, limit: int = 100, cursor: str | None = None
    ) -> Page[StoredSecret]:
        """``team``'s secrets by name, a page at a time."""
        ...

    async def delete_secret(self, team: str, name: str, *, audit: AuditEntry | None = None) -> StoredSecret:
        """Delete the secret and return what it was (``NotFoundError`` if there is none)."""
        ...

    async def secrets_to_rekey(
        self, key_id: str, after: tuple[str, str] | None = None, limit: int = 100
    ) -> list[StoredSecret]:
        """Secrets of every team sealed under another key than ``key_id``, by (team, name), at
        most ``limit``, starting after ``after`` (the last (team, name) of the previous batch)."""
        ...

    async def rekey_secret(self, secret: StoredSecret, key_id: str, value: bytes) -> bool:
        """Replace ``secret``'s sealed value with ``value`` under ``key_id``, only if the stored
        value is still ``secret.value`` (a concurrent ``put_secret`` wins); ``updated_at`` is
        kept (the secret did not change, its encryption did). Returns whether it was replaced."""
        ...


class CalendarStore(Protocol):
    """A team's named calendars (unique per team and name). Jobs carry the union of the
    calendars they list (``Job.calendar_spec``), which ``create_job`` and ``update_job`` resolve in
    their transaction (refusing a name the team has none of: ``InvalidInputError``) and
    ``update_calendar`` rewrites, in its own, for every live job that lists the calendar."""

    async def create_calendar(self, calendar: Calendar, *, audit: AuditEntry | None = None) -> Calendar:
        """Store a new calendar at version 1 (``ConflictError`` when the name is taken)."""
        ...

    async def get_calendar(self, team: str, name: str) -> Calendar:
        """The calendar (``NotFoundError`` when the team has none of that name)."""
        ...

    async def list_calendars(self, team: str, limit: int = 100, cursor: str | None = None) -> Page[Calendar]:
        """The team's calendars by name."""
        ...

    async def update_calendar(
        self, calendar: Calendar, expected_version: int | None = None, *, audit: AuditEntry | None = None
    ) -> tuple[Calendar, list[str]]:
        """Replace a calendar's description and spec (version + 1; ``ConflictError`` for a stale
        ``expected_version``) and, in the same transaction, rewrite the resolved spec of the live
        jobs listing it, bumping their version (they are notified as changed, and their armed runs
        disarmed as an edit does). Returns the calendar and those jobs' ids."""
        ...

    async def delete_calendar(self, team: str, name: str, *, audit: AuditEntry | None = None) -> Calendar:
        """Delete a calendar no live job lists (``ConflictError`` naming the jobs that do)."""
        ...


class TokenStore(Protocol):
    """API tokens: their public records and digests, never a token."""

    async def create_token(self, token: ApiToken, *, audit: AuditEntry | None = None) -> ApiToken: ...

    async def get_token(self, token_id: str) -> ApiToken:
        """The token ``token_id``, whatever its state (``NotFoundError`` if none)."""
        ...

    async def list_tokens(self, query: TokenQuery) -> Page[ApiToken]:
        """Tokens, oldest first (by creation, then id), a page at a time."""
        ...

    async def revoke_token(
        self, token_id: str, now: datetime, *, audit: AuditEntry | None = None
    ) -> ApiToken:
        """Revoke the token (from ``now`` on; a revoked one keeps its first ``revoked_at``, and
        ``audit`` is not appended for it) and return it; ``NotFoundError`` if none."""
        ...

    async def touch_token(self, token_id: str, now: datetime, stale_before: datetime) -> bool:
        """Set the token's ``last_used_at`` to ``now`` if it is unset or not after
        ``stale_before``; whether it was written. Conditional, so that concurrent requests (and
        api processes) write it once."""
        ...


class AuditLog(AuditWriter, Protocol):
    """The audit log: appended (most entries in the transaction of the change they record), read
    within walls, pruned only by the retention of the operator."""

    async def list_audit(self, query: AuditQuery) -> Page[AuditEntry]:
        """Entries, newest first (by ``at``, then id), a page at a time."""
        ...

    async def prune_audit(self, before: datetime) -> int:
        """Delete the entries older than ``before`` (the operator's retention); how many."""
        ...


class NoticeStore(Protocol):
    """Notification rules, each job's notification state and the outbox. A run's terminal state
    enters the inbox in the transaction that writes it; :meth:`process_notification_inbox`
    decides from it (with :mod:`cronwheel.notifications.decide`) exactly once per state change;
    delivery from the outbox is at least once."""

    async def notification_rules(self, scope: str) -> tuple[Rule, ...] | None:
        """The rules stored for ``scope`` (``team_scope``, ``job_scope`` of
        :mod:`cronwheel.notifications.rules`); None: none stored."""
        ...

    async def set_notification_rules(
        self,
        scope: str,
        team: str,
        job_id: str | None,
        rules: tuple[Rule, ...],
        *,
        audit: AuditEntry | None = None,
    ) -> None:
        """Store ``scope``'s rules (replacing what was there), with ``audit`` in the same transaction."""
        ...

    async def delete_notification_rules(self, scope: str, *, audit: AuditEntry | None = None) -> bool:
        """Drop ``scope``'s rules; whether there were any (``audit`` is appended only then)."""
        ...

    async def process_notification_inbox(self, now: datetime, limit: int = 500) -> int:
        """Claim up to ``limit`` inbox rows and decide their notifications in one transaction;
        how many rows were taken (0: the inbox is empty)."""
        ...

    async def watched_jobs(self, condition: Condition) -> list[tuple[Job, tuple[Rule, ...]]]:
        """Live, unpaused jobs whose rules (their own, else their team's) ask for ``condition``."""
        ...

    async def terminal_slots(self, slots: Sequence[tuple[str, datetime]]) -> set[tuple[str, datetime]]:
        """Which (job id, slot) pairs have a run in a terminal state."""
        ...

    async def record_observations(self, observations: Sequence[Observation], now: datetime) -> int:
        """Record what the dead-man's switch saw, deciding as the inbox does; outbox rows written."""
        ...

    async def enqueue_notification(
        self, notification: Notification, channels: Sequence[Channel], now: datetime
    ) -> int:
        """Write ``notification`` to the outbox for ``channels`` (a test notification)."""
        ...

    async def due_deliveries(self, now: datetime, limit: int = 100) -> list[Delivery]:
        """Outbox rows due for a try at ``now``, oldest first."""
        ...

    async def mark_delivered(
        self, delivery_id: str, now: datetime, error: str | None = None, retry_at: datetime | None = None
    ) -> None:
        """Record one try: sent (``error`` None), to try again at ``retry_at``, or given up."""
        ...

    async def prune_deliveries(self, before: datetime) -> int:
        """Delete the outbox rows delivered or given up before ``before``; how many."""
        ...

    async def outbox(self, job_id: str | None = None) -> list[dict[str, Any]]:
        """The outbox rows (of one job), oldest first."""
        ...


class ServerClock(Protocol):
    """The store's clock, the one reference every node of a cluster anchors to."""

    async def server_time(
        self, stamp: Callable[[], float], samples: int = 3
    ) -> list[tuple[float, datetime, float]]:
        """The store's own clock (PostgreSQL: ``clock_timestamp()``), the one reference every
        node of a cluster anchors to: ``samples`` reads on one connection, each as ``(stamp()
        just before, the store's time, stamp() just after)`` so that the caller can keep the
        tightest (NTP's rule). A single-process store answers with its process clock."""
        ...


class Store(
    JobStore,
    FiringStore,
    BackfillStore,
    LeaseStore,
    SweepStore,
    PurgeStore,
    RunReads,
    ClusterReads,
    UpcomingReads,
    SecretStore,
    CalendarStore,
    TokenStore,
    AuditLog,
    NoticeStore,
    ServerClock,
    Protocol,
):
    """The metadata store. Every method is atomic; every instant is aware UTC.

    Contract (checked by ``tests/store`` on every backend, a file per port):

    * Jobs: ``create_job`` refuses a second live job with the same (team, name) with
      ``ConflictError``; ``update_job`` with ``expected_version`` refuses a stale version with
      ``ConflictError`` and bumps ``version`` on success; deleted jobs are invisible to
      ``get_job``/``list_jobs``/``due_jobs`` (``NotFoundError``) but their runs stay readable.
    * Team quota: given ``team_quota``, ``create_job`` (and ``update_job`` moving a job to
      another team) refuses a job for a team that already has that many live jobs with
      ``QuotaExceededError``, counted in the writing transaction so that two writes at once
      cannot both take a team's last place.
    * Firing: ``fire`` applies each :class:`Firing` in one transaction; a firing whose job moved
      on (version, cursor, deleted) writes nothing and is reported stale; a run whose (job, slot)
      already exists is not inserted twice ("already exists" is success, not an error).
    * Fencing: ``claim_shards`` records each shard's lease epoch unless a newer one is stored;
      ``fire`` with ``epochs`` applies a firing only while its job's shard is stored at exactly
      that epoch, and reports the others fenced (nothing written), so a scheduler paused past its
      lease cannot write once the next owner has claimed the shard.
    * Lifecycle: ``resume_job`` (the job and its SKIPPED paused slots) and ``delete_job`` with
      ``cancel_active`` (the job and its runs' cancel flags) are one transaction each, like
      every method: a failure between their writes leaves nothing written.
    * Teams: ``JobQuery.teams`` and ``RunQuery.teams`` restrict a listing to those teams' jobs
      (a run's team is its job's, live or deleted) in the query itself: a page holds ``limit``
      visible items when there are that many, never fewer because others were filtered out.
    * Tokens: ``create_token`` stores a token's digest (``ConflictError`` for a taken id);
      ``get_token`` reads revoked and expired tokens too (the caller judges them); a revoked
      token stays revoked (``revoke_token`` again keeps the first ``revoked_at``).
    * Runs move only along ``model.LEGAL_TRANSITIONS``; every change appends a ``RunEvent``.
      ``claim_run`` is a conditional PENDING/RETRYING -> RUNNING write that starts attempt n+1;
      ``heartbeat`` and ``finish_attempt`` succeed only for the current lease holder.
    * Secrets: one per (team, name); ``put_secret`` creates or replaces it (keeping
      ``created_at``); ``rekey_secret`` replaces a value only if it is still the one read.
    * Audit: every job, token and secret write takes an optional ``audit`` entry, appended in the
      same transaction (with its ``before``/``after`` snapshots filled from the rows the write
      read and wrote) when the write changed something: both or neither. ``list_audit`` reads
      newest first within ``AuditQuery.teams`` (an entry of no team is outside every wall);
      nothing updates an entry, and only ``prune_audit`` (the operator's retention) deletes.
    """

    async def close(self) -> None: ...
