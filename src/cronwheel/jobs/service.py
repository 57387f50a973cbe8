"""Job operations shared by the API and anything else that edits jobs.

The API's routes are thin: they convert pydantic models to records and call :class:`JobService`,
which validates against the schedule engine and the operator's policy, computes the job's cursor,
writes through the :class:`Store`, and tells the schedulers about the change at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from yarl import URL

from cronwheel.audit import Actor, AuditAction, AuditEntry
from cronwheel.clock import Clock
from cronwheel.errors import FieldRefusedError, InvalidInputError, NotFoundError
from cronwheel.jobs.backfill import BackfillPlan, check_confirmed, check_range, check_slots
from cronwheel.limits import Limits
from cronwheel.model import (
    Backfill,
    CalendarShift,
    CalendarSpec,
    CommandTarget,
    Job,
    PythonTarget,
    Run,
    RunKind,
    RunState,
    SkipReason,
    Target,
    new_id,
    utc_text,
)
from cronwheel.queue import Queue, Trigger
from cronwheel.schedule import OnceSchedule
from cronwheel.schedule.calendar import union
from cronwheel.schedule.elapsed import is_once
from cronwheel.schedule.gaps import Gap, shortest_gap
from cronwheel.schedule.jitter import MAX_JITTER_S, too_wide
from cronwheel.scheduler.backfill import BACKFILL_MAX_SLOTS, slots_in
from cronwheel.scheduler.planner import first_slot, last_slots, late_once, schedule_of
from cronwheel.store import Store
from cronwheel.store.port import UnknownCalendarError
from cronwheel.targets import python as python_targets
from cronwheel.targets.kinds import check_target, kind_of, plain_credentials, secret_references
from cronwheel.targets.ssrf import parse_networks, url_refusal
from cronwheel.telemetry import metrics
from cronwheel.telemetry.tracing import OFF, Tracer, ending
from cronwheel.telemetry.tracing import runs as spans

log = logging.getLogger("cronwheel.service")

MAX_PAYLOAD_BYTES = 64 * 1024
MAX_PAYLOAD_DEPTH = 64  # nested arrays and objects; pydantic's serializer gave up (a 500) past about 500
MAX_TIMEOUT_S = 24 * 3600.0
MAX_PAUSED_SKIPS = 1000  # SKIPPED(paused) runs recorded on resume; older ones are counted and logged
MAX_JOB_CALENDARS = 16  # calendars one job lists
SHIFT_MIN_GAP_S = 23 * 3600  # a shifted job fires at most once a local day (23 h: a DST day's length)


class ChangeListener(Protocol):
    def job_changed(self, job_id: str) -> None: ...


class ChangeFeed:
    """In-process fan-out of "job X changed" to the schedulers of this process (embedded mode).

    In a cluster the same role is played by the database's notifications."""

    def __init__(self) -> None:
        self._subscribers: list[asyncio.Queue[str]] = []

    def subscribe(self) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str]) -> None:
        """Stop filling ``queue`` (one that was not subscribed is ignored)."""
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    def job_changed(self, job_id: str) -> None:
        for queue in self._subscribers:
            queue.put_nowait(job_id)


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """What the operator lets jobs target (checked when a job is written, and again by workers)."""

    allow_commands: bool = False
    python_allow: tuple[str, ...] = ()
    allowed_networks: tuple[str, ...] = ()
    queues: tuple[str, ...] | None = None  # worker queues served here (None: not known, any accepted)
    allow_plain_credentials: bool = False  # --allow-plain-credentials

    def __post_init__(self) -> None:
        python_targets.check_patterns(self.python_allow)

    def check_credentials(self, target: Target, stored: Target | None = None) -> None:
        """Refuse (:class:`PlainCredentialError`) the credentials ``target`` holds in clear
        (:func:`cronwheel.targets.kinds.plain_credentials`) unless the operator allows them; one the
        ``stored`` definition already holds, same field and value, is kept: an edit of another
        field, or a whole definition read back and written again, does not need it moved first.
        Checked where a job is written, never by workers: stored jobs run as they are."""
        if self.allow_plain_credentials:
            return
        kept = set(plain_credentials(stored)) if stored is not None else set()
        fields = [field for field, value in plain_credentials(target) if (field, value) not in kept]
        if fields:
            raise PlainCredentialError(fields)

    def check_queue(self, queue: str) -> None:
        if self.queues is not None and queue not in self.queues:
            served = ", ".join(self.queues)
            raise InvalidInputError(f"no worker serves queue {queue!r} (served: {served}; see --queue)")

    def check(self, target: Target) -> None:
        """Refuse a target this server does not run: a command or a function the operator did not
        allow, or an address (:meth:`_check_address`) in a network the operator did not allow."""
        if isinstance(target, CommandTarget) and not self.allow_commands:
            raise InvalidInputError(
                "command targets are disabled on this server (start it with --allow-commands)"
            )
        if isinstance(target, PythonTarget):
            refused = python_targets.refusal(target.function, self.python_allow)
            if refused is not None:
                raise InvalidInputError(refused)
        for field, url in kind_of(target).addresses(target):
            self._check_address(field, url)

    def _check_address(self, field: str, url: URL) -> None:
        """Refuse an address whose host is a non-public address however it is spelled (the host
        read as the client and the resolver will read it: :func:`cronwheel.targets.ssrf.url_refusal`).
        Host names are judged at every attempt, on the addresses they resolve to. The message
        names ``field`` and never quotes the URL: its user info or query may hold a secret."""
        refusal = url_refusal(url, parse_networks(self.allowed_networks))
        if refusal is not None:
            raise InvalidInputError(
                f"{field} points to a non-public address: {refusal}; "
                "an operator must allow its network (--allow-network)"
            )


class PlainCredentialError(InvalidInputError):
    """A job, or notification rules, hold credentials in clear where the server wants secret
    references (422, one entry per field; the values are never quoted)."""

    def __init__(self, fields: list[str]) -> None:
        self.problems = [(field, _plain_reason(field)) for field in fields]
        more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
        super().__init__(f"{fields[0]} {self.problems[0][1]}{more}")


def _plain_reason(field: str) -> str:
    if field.startswith("rules."):  # a notification channel's URL
        return (
            "holds a credential in clear (a Slack-compatible URL, whose path is its token, or user info "
            'or a secret query parameter): give the whole URL as a secret reference ({"secret": NAME}, '
            "set with `cronwheel secrets set`; `cronwheel secrets adopt-notifications` moves stored "
            "ones); this server refuses plain credentials (--allow-plain-credentials)"
        )
    if field == "target.url":
        return (
            "holds credentials in clear (user info, or a secret query parameter): send them in a header "
            'whose value is a secret reference ({"secret": NAME}); this server refuses plain credentials '
            "(--allow-plain-credentials)"
        )
    return (
        'holds a credential in clear: give a secret reference ({"secret": NAME}, set with `cronwheel '
        "secrets set`; `cronwheel secrets adopt` moves a stored job's values); this server refuses "
        "plain credentials (--allow-plain-credentials)"
    )


class UnknownSecretError(InvalidInputError):
    """A job, or notification rules, refer to secrets the team does not have (422, one entry
    per field)."""

    def __init__(self, team: str, missing: list[tuple[str, str]]) -> None:
        self.problems = [
            (field, f"refers to secret {name!r}, which team {team!r} does not have")
            for field, name in missing
        ]
        first_field, first_name = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        super().__init__(
            f"{first_field} refers to secret {first_name!r}, which team {team!r} does not have{more}; "
            f"set it first: cronwheel secrets set {team}/{first_name}"
        )


class JobService:
    """Creates, edits, pauses, resumes, triggers, backfills and deletes jobs, within the operator's
    ``limits``: a team's quota of live jobs and the minimum interval between fires."""

    def __init__(
        self,
        store: Store,
        queue: Queue,
        changes: ChangeListener,
        clock: Clock,
        policy: TargetPolicy,
        new_run_id: Callable[[], str] = new_id,
        limits: Limits = Limits(),  # noqa: B008 - a frozen record, shared safely
        tracer: Tracer = OFF,
    ) -> None:
        self.store = store
        self.queue = queue
        self.changes = changes
        self.clock = clock
        self.policy = policy
        self.new_run_id = new_run_id
        self.limits = limits
        self.tracer = tracer  # a manual run's trace starts with its trigger (off: no trace)

    def validate(self, job: Job) -> None:
        """Refuse a job whole (InvalidInputError / ScheduleError) before anything is written."""
        schedule_of(job)  # raises ScheduleError with field, position and reason
        self.policy.check(job.target)  # first: "loopback" says more than "spell it a.b.c.d"
        check_target(job.target)  # what no attempt could run (NUL bytes, a URL aiohttp refuses ...)
        self.policy.check_queue(job.queue)
        if not 0 < job.timeout_s <= MAX_TIMEOUT_S:
            raise InvalidInputError(f"timeout_s must be in (0, {MAX_TIMEOUT_S:g}], not {job.timeout_s}")
        if not 0 <= job.jitter_s <= MAX_JITTER_S:
            raise InvalidInputError(f"jitter_s must be in [0, {MAX_JITTER_S:g}], not {job.jitter_s}")
        if job.start_at is not None and job.end_at is not None and job.end_at <= job.start_at:
            raise InvalidInputError("end_at must be after start_at")
        check_payload(job.payload)
        refused = delete_after_success_refusal(job.schedule, job.delete_after_success)
        if refused is not None:
            raise InvalidInputError(refused)
        check_calendars(job, self.clock.now())

    async def with_calendars(self, job: Job) -> Job:
        """``job`` with the union of its calendars' specs (the store resolves them again in the
        writing transaction); refuse names its team has no calendar of."""
        return dataclasses.replace(
            job, calendar_spec=await resolve_calendars(self.store, job.team, job.calendars)
        )

    async def check_secrets(self, job: Job) -> None:
        """Refuse a job that refers to a secret its team does not have (one store read). The
        secret may still be deleted later: its attempts then fail, saying which is missing."""
        references = secret_references(job.target)
        if not references:
            return
        found = await self.store.get_secrets(job.team, sorted({ref.name for _, ref in references}))
        missing = [(field, ref.name) for field, ref in references if ref.name not in found]
        if missing:
            raise UnknownSecretError(job.team, missing)

    async def create(self, job: Job, actor: Actor | None = None) -> Job:
        """Store a new job with its first slot; one that would never fire, or fire more often
        than the operator allows, is refused, and so is one more job for a full team (the store
        counts in the writing transaction)."""
        stored = await self.check_new(dataclasses.replace(job, id=job.id or new_id()))
        entry = _entry(actor, AuditAction.JOB_CREATE, stored.created_at or self.clock.now(), stored)
        created = await self.store.create_job(stored, team_quota=self.limits.team_quota, audit=entry)
        self.changes.job_changed(created.id)
        return created

    async def check_new(self, job: Job) -> Job:
        """``job`` as :meth:`create` would store it (version 1, its first slot), or the refusal
        create would give; nothing is written. What only the writing transaction knows (a name
        taken, a full team: 409) is not judged here. ``job.id`` is what ``H`` hashes: empty for
        a validation, which cannot know the id a create will give."""
        self.validate(job)
        self.policy.check_credentials(job.target)
        await self.check_secrets(job)
        job = await self.with_calendars(job)
        now = self.clock.now()
        stored = dataclasses.replace(
            job,
            version=1,
            created_at=now,
            updated_at=now,
            paused_at=now if job.paused else None,
            next_run_at=None,
            deleted_at=None,
        )
        self.limits.check_interval(schedule_of(stored), now)  # with its id: H hashes it
        check_jitter(stored, now)
        return dataclasses.replace(stored, next_run_at=_first_slot_or_refuse(stored, now))

    async def update(self, job: Job, expected_version: int | None, actor: Actor | None = None) -> Job:
        """Replace the job's definition; the cursor restarts from now when timing changed.

        An edit that changes nothing writes nothing and keeps the version, so that other clients'
        ``If-Match`` still hold. A timing edit that leaves the job no slot, or that fires more
        often than the operator allows, is refused (an edit that leaves the timing alone is not
        judged again: a minimum raised later does not lock existing jobs), and so is a move to a
        team that is full."""
        self.validate(job)
        current = await self.store.get_job(job.id)
        if definition(job) == definition(current) and expected_version in (None, current.version):
            return current
        updated, retimed = await self._checked_edit(job, current)
        stored = await self.store.update_job(
            updated,
            expected_version,
            move_cursor=retimed,
            team_quota=self.limits.team_quota,
            audit=_entry(actor, AuditAction.JOB_UPDATE, updated.updated_at or self.clock.now(), current),
        )  # a moved job: its old team's audit
        self.changes.job_changed(stored.id)
        return stored

    async def check_edit(self, job: Job) -> Job:
        """``job`` (a whole new definition of the stored job ``job.id``) as :meth:`update` would
        store it, or the refusal update would give; nothing is written (a 409 of the writing
        transaction is not judged here, see :meth:`check_new`)."""
        self.validate(job)
        current = await self.store.get_job(job.id)
        updated, _ = await self._checked_edit(job, current)
        return updated

    async def _checked_edit(self, job: Job, current: Job) -> tuple[Job, bool]:
        """The edited job to store and whether its timing changed (then its cursor restarts
        from now), after the checks that need the stored job."""
        self.policy.check_credentials(job.target, current.target)
        await self.check_secrets(job)
        job = await self.with_calendars(job)
        now = self.clock.now()
        updated = dataclasses.replace(
            job,
            created_at=current.created_at,
            updated_at=now,
            next_run_at=current.next_run_at,
            paused=current.paused,
            pause_note=current.pause_note,
            paused_at=current.paused_at,
            deleted_at=None,
        )
        retimed = _timing(updated) != _timing(current)
        check_jitter(updated, now)  # the schedule's own gaps: judged whatever the edit
        if retimed:
            self.limits.check_interval(schedule_of(updated), now)
            updated = dataclasses.replace(updated, next_run_at=_first_slot_or_refuse(updated, now))
        return updated, retimed

    async def pause(
        self, job_id: str, note: str | None, expected_version: int | None = None, actor: Actor | None = None
    ) -> Job:
        job = await self.store.get_job(job_id)
        if job.paused:
            return job
        now = self.clock.now()
        paused = dataclasses.replace(job, paused=True, pause_note=note, paused_at=now, updated_at=now)
        stored = await self.store.update_job(
            paused, expected_version, audit=_entry(actor, AuditAction.JOB_PAUSE, now, job)
        )
        self.changes.job_changed(job_id)
        return stored

    async def resume(
        self,
        job_id: str,
        missed: Literal["skip", "misfire"] = "skip",
        expected_version: int | None = None,
        actor: Actor | None = None,
    ) -> Job:
        """Resume a paused job. ``skip``: the slots missed while paused are recorded SKIPPED
        (paused) and the job carries on from now; ``misfire``: they are left to the job's misfire
        policy, as after downtime."""
        job = await self.store.get_job(job_id)
        if not job.paused:
            return job
        now = self.clock.now()
        resumed = dataclasses.replace(job, paused=False, pause_note=None, paused_at=None, updated_at=now)
        skipped: list[Run] = []
        if missed == "skip":
            skipped = self._paused_slots(job, now)
            resumed = dataclasses.replace(resumed, next_run_at=first_slot(job, now))
        stored, recorded = await self.store.resume_job(
            resumed,
            expected_version,
            skipped,
            now,
            move_cursor=missed == "skip",
            audit=_entry(actor, AuditAction.JOB_RESUME, now, job),
        )  # one transaction: never resumed without the records of its paused slots
        if recorded:
            metrics.RUNS_RECORDED.labels("SKIPPED", SkipReason.PAUSED.value).inc(len(recorded))
        self.changes.job_changed(job_id)
        return stored

    def _paused_slots(self, job: Job, now: datetime) -> list[Run]:
        """SKIPPED(paused) runs for the slots that passed while ``job`` was paused (the newest
        MAX_PAUSED_SKIPS of them; when there were more, the rest is logged)."""
        if job.next_run_at is None or job.next_run_at > now:
            return []
        end = now if job.end_at is None else min(now, job.end_at)
        slots, more = last_slots(job, job.next_run_at, end, MAX_PAUSED_SKIPS)
        if more:
            log.warning(
                "paused slots not recorded one by one",
                extra={"action": "skip", "job_id": job.id, "reason": "paused", "recorded": len(slots)},
            )
        return [
            Run(
                id=self.new_run_id(),
                job_id=job.id,
                kind=RunKind.SCHEDULED,
                slot=slot_at,
                state=RunState.SKIPPED,
                queue=job.queue,
                job_version=job.version,
                reason=SkipReason.PAUSED.value,
            )
            for slot_at in slots
        ]

    async def trigger(
        self,
        job_id: str,
        payload: Any = None,
        has_payload: bool = False,
        idempotency_key: str | None = None,
        actor: Actor | None = None,
        *,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> tuple[Run, bool]:
        """Run the job now. The same ``idempotency_key`` returns the same run (and False). With
        tracing on, the run's trace starts here, continuing the caller's W3C ``traceparent``
        (and ``tracestate``) when it sent one; with tracing off they are ignored."""
        job = await self.store.get_job(job_id)
        if has_payload:
            check_payload(payload)
        now = self.clock.now()
        run = Run(
            id=self.new_run_id(),
            job_id=job.id,
            kind=RunKind.MANUAL,
            slot=now,
            state=RunState.PENDING,
            queue=job.queue,
            job_version=job.version,
            payload=payload if has_payload else None,
            has_payload=has_payload,
            idempotency_key=idempotency_key,
        )
        entry = _entry(actor, AuditAction.JOB_TRIGGER, now, job)
        if not self.tracer.enabled:
            return await self._record_manual(run, entry, now)
        span = spans.manual_fire(self.tracer, run, job.team, now, traceparent, tracestate)
        with ending(span, self.clock):
            traced = dataclasses.replace(run, traceparent=span.traceparent)
            stored, created = await self._record_manual(traced, entry, now)
            if not created:  # the run of the first request with this key, in that request's trace
                span.set({"cronwheel.run_id": stored.id, "cronwheel.recorded": False})
        return stored, created

    async def _record_manual(self, run: Run, entry: AuditEntry | None, now: datetime) -> tuple[Run, bool]:
        stored, created = await self.store.create_manual_run(run, audit=entry)
        if created:
            await self.queue.publish([Trigger(stored.id, stored.job_id, stored.queue)])
            await self.store.mark_queued([stored.id], now)
        return stored, created

    async def plan_backfill(self, job_id: str, start: datetime, end: datetime) -> BackfillPlan:
        """The backfill of [``start``, ``end``] as :meth:`backfill` would record it now, or the
        refusal it would give (but for confirmation); nothing is written (a dry run)."""
        job = await self.store.get_job(job_id)
        check_range(start, end, self.clock.now())
        # up to half a second of the schedule engine for the widest ranges: off the event loop
        slots = await asyncio.to_thread(slots_in, job, start, end, BACKFILL_MAX_SLOTS + 1)
        check_slots(job, start, end, len(slots))
        taken = await self.store.slots_with_runs(job.id, start, end)
        missing = tuple(slot for slot in slots if slot not in taken)
        return BackfillPlan(job, start, end, missing, tuple(slot for slot in slots if slot in taken))

    async def backfill(
        self, job_id: str, start: datetime, end: datetime, confirm: bool = False, actor: Actor | None = None
    ) -> Backfill:
        """Accept a backfill of the job's slots in [``start``, ``end``] (one transaction with its
        audit entry); the backfiller records their runs at its rate. A slot that has a run keeps
        it, so backfilling a range again records nothing new."""
        plan = await self.plan_backfill(job_id, start, end)
        check_confirmed(plan.total, confirm)
        now = self.clock.now()
        record = Backfill(
            new_id(), plan.job.id, start, end, plan.total, plan.first, created_at=now, updated_at=now
        )
        return await self.store.create_backfill(
            record, audit=_entry(actor, AuditAction.JOB_BACKFILL, now, plan.job)
        )

    async def cancel_backfill(self, job_id: str, backfill_id: str, actor: Actor | None = None) -> Backfill:
        """Stop the job's running backfill: the backfiller records no run for it after this
        (one transaction with its audit entry); the runs it recorded stay, real runs of real
        slots. One of another job is not found; one that has ended is refused (409)."""
        job = await self.store.get_job(job_id)
        backfill = await self.store.get_backfill(backfill_id)
        if backfill.job_id != job.id:
            raise NotFoundError(f"job {job_id} has no backfill {backfill_id}")
        now = self.clock.now()
        entry = _entry(actor, AuditAction.JOB_BACKFILL_CANCEL, now, job)
        return await self.store.cancel_backfill(backfill_id, now, audit=entry)

    async def delete(self, job_id: str, actor: Actor | None = None, team: str | None = None) -> Job:
        """No further runs; unfinished ones are asked to stop; the history stays readable.
        ``team`` (the job's, as the caller read it) names the team of the audit entry."""
        now = self.clock.now()
        entry = None
        if actor is not None:
            team = team if team is not None else (await self.store.get_job(job_id)).team
            entry = actor.entry(AuditAction.JOB_DELETE, now, team, ("job", job_id, None))
        deleted = await self.store.delete_job(job_id, now, cancel_active=True, audit=entry)  # one transaction
        self.changes.job_changed(job_id)
        return deleted


def _entry(actor: Actor | None, action: AuditAction, now: datetime, job: Job) -> AuditEntry | None:
    """The audit entry of ``actor``'s ``action`` on ``job`` (None without an actor: a write
    that no API caller made). The store fills its before/after in the writing transaction."""
    if actor is None:
        return None
    return actor.entry(action, now, job.team, ("job", job.id, job.name))


def _timing(job: Job) -> tuple[object, ...]:
    return (
        job.schedule, job.timezone, job.dst_gap, job.dst_fold, job.start_at, job.end_at,
        job.calendar_spec, job.calendar_shift,
    )  # fmt: skip


async def resolve_calendars(store: Store, team: str, names: Sequence[str]) -> CalendarSpec | None:
    """The union of the specs of ``team``'s calendars ``names`` (None for none), or
    :class:`UnknownCalendarError` naming those the team does not have."""
    specs, missing = [], []
    for name in names:
        try:
            specs.append((await store.get_calendar(team, name)).spec)
        except NotFoundError:
            missing.append(name)
    if missing:
        raise UnknownCalendarError(team, missing)
    return union(specs)


def check_calendars(job: Job, now: datetime) -> None:
    """Refuse a job's calendar fields: too many or repeated names, or a shift on a schedule that
    fires more than once a local day (a shifted run lands at the same wall time on another day:
    on a schedule with closer fires it would crowd or duplicate that day's own runs)."""
    names = job.calendars
    if len(names) > MAX_JOB_CALENDARS:
        raise FieldRefusedError("calendars", f"{len(names)} given; at most {MAX_JOB_CALENDARS}", "too_many")
    for index, name in enumerate(names):
        if name in names[:index]:
            raise FieldRefusedError(f"calendars[{index}]", f"{name!r} is listed twice", "duplicate")
    if job.calendar_shift is CalendarShift.NONE:
        return
    if not names:
        raise FieldRefusedError(
            "calendar_shift", "a shift needs calendars to shift away from", "shift_without_calendars"
        )
    gap = shortest_gap(schedule_of(job), now, below=SHIFT_MIN_GAP_S)
    if gap is not None:
        raise FieldRefusedError(
            "calendar_shift",
            f"{job.schedule!r} fires {gap.seconds} s apart ({gap.first.isoformat()}, then "
            f"{gap.second.isoformat()}); a shift moves a run to the same time on another day, so it "
            "needs a schedule that fires at most once a local day (23 h apart or more), such as payroll "
            "on the last day of the month",
            "shift_needs_daily_schedule",
        )


def definition(job: Job) -> Job:
    """The part of ``job`` a client defines (the server's fields blanked): two jobs with equal
    definitions differ only by what the server keeps (version, times, cursor, pause state)."""
    return dataclasses.replace(
        job, version=0, created_at=None, updated_at=None, next_run_at=None,
        paused=False, pause_note=None, paused_at=None, deleted_at=None, calendar_spec=None,
    )  # fmt: skip


class NoSlotError(InvalidInputError):
    """A new job, or a timing edit, that would leave the job without any slot to fire."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field  # the field to change: end_at, or the schedule


class JitterTooWideError(InvalidInputError):
    """A jitter window as long as the schedule's shortest gap between two slots, or longer: a
    slot could fire after the next one (or with it)."""

    field = "jitter_s"

    def __init__(self, job: Job, gap: Gap) -> None:
        self.jitter_s = job.jitter_s
        self.shortest_s = gap.seconds
        super().__init__(
            f"jitter_s {job.jitter_s:g} must be shorter than the shortest gap between two slots of "
            f"{job.schedule!r} ({job.timezone}): {gap.seconds} s ({gap.first.isoformat()}, then "
            f"{gap.second.isoformat()}), so that no slot fires after the next one"
        )


def check_jitter(job: Job, now: datetime) -> None:
    """Refuse (:class:`JitterTooWideError`) a jitter window that is not shorter than every gap
    between two consecutive slots of the job's schedule (DST included; none for ``@at``)."""
    gap = too_wide(schedule_of(job), job.jitter_s, now)
    if gap is not None:
        raise JitterTooWideError(job, gap)


def _first_slot_or_refuse(job: Job, now: datetime) -> datetime:
    slot = first_slot(job, now) or late_once(job, now)
    if slot is None:
        field, reason = no_slot_reason(job, now) or ("schedule", "the job would never fire")
        raise NoSlotError(field, reason)
    return slot


def no_slot_reason(job: Job, now: datetime) -> tuple[str, str] | None:
    """Why ``job`` would never fire after ``now`` (the field to blame, and the reason), or None
    when it has a slot. A job with no slot would sit idle with ``next_run_at`` null: a client
    that wrote one (an ``end_at`` already past, a window between two fire times) made a mistake
    it should hear about, rather than find out when nothing ran."""
    if first_slot(job, now) is not None or late_once(job, now) is not None:
        return None
    schedule = schedule_of(job)
    if isinstance(schedule, OnceSchedule) and schedule.at <= now:
        return "schedule", (
            f"{job.schedule!r} has passed (now {utc_text(now)}) and misfire {job.misfire.mode.value} with "
            f"grace_s {job.misfire.grace_s:g} would record it SKIPPED, not run it: give a later instant, "
            "or misfire run_once to run it late"
        )
    if job.end_at is not None and job.end_at <= now:
        passed = f"end_at {utc_text(job.end_at)} has passed (now {utc_text(now)})"
        return "end_at", f"{passed}: the job would never fire"
    start = now if job.start_at is None or job.start_at <= now else job.start_at
    following = schedule_of(job).next_after(start)
    shown = f"{job.schedule!r} ({job.timezone})"
    if following is None or job.end_at is None:
        return "schedule", f"{shown} has no fire time after {utc_text(start)}: the job would never fire"
    return "end_at", (
        f"no fire time of {shown} falls between {utc_text(start)} and end_at {utc_text(job.end_at)}"
        f" (the next is {utc_text(following)}): the job would never fire"
    )


def delete_after_success_refusal(schedule: str, delete_after_success: bool) -> str | None:
    """Why a job may not have ``delete_after_success`` (None: it may). Only a one-time job's
    (``@at``) success is its last run: a job that fires again is never done, and deleting it on
    one success would silently drop its later slots."""
    if not delete_after_success or is_once(schedule):
        return None
    return "delete_after_success is for one-time jobs only (schedule '@at INSTANT'): this job fires again"


def payload_depth(payload: Any, stop_at: int) -> int:
    """How deeply ``payload``'s arrays and objects nest (a scalar: 0), counted without recursion
    and no further than ``stop_at``."""
    deepest, level = 0, [payload]
    while level and deepest < stop_at:
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.values())
            elif isinstance(item, (list, tuple)):
                inner.extend(item)
        if not any(isinstance(item, (dict, list, tuple)) for item in level):
            break
        deepest, level = deepest + 1, inner
    return deepest


def check_payload(payload: Any) -> None:
    if payload_depth(payload, MAX_PAYLOAD_DEPTH + 1) > MAX_PAYLOAD_DEPTH:
        raise InvalidInputError(f"payload nests more than {MAX_PAYLOAD_DEPTH} arrays or objects deep")
    try:
        size = len(json.dumps(payload, separators=(",", ":"), allow_nan=False).encode())
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"payload must be JSON: {error}") from None
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidInputError(f"payload is {size} bytes; at most {MAX_PAYLOAD_BYTES} are accepted")
