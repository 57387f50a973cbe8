"""Records <-> rows: the one place that knows how jobs, runs, attempts and events are laid out
in the tables of :mod:`cronwheel.store.schema`.

Targets and policies become small JSON objects with explicit keys (``type`` tags the target, the
word of the API and jobs.yaml; rows written by earlier versions say ``kind`` and are still read);
labels and header/env pairs become lists of ``[key, value]`` so their order survives; a header or
env value that refers to a secret is ``{"secret": name}``, as in the API (never the secret's value:
secrets are rows of their own, sealed, see :func:`secret_to_row`). Instants
stay ``datetime`` here: the :class:`~cronwheel.store.schema.Instant` column type converts them.
Pagination cursors are opaque base64url JSON.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import ApiToken
from cronwheel.errors import InvalidInputError
from cronwheel.model import (
    Attempt,
    Backfill,
    BackfillState,
    Calendar,
    CalendarShift,
    CalendarSpec,
    DueJob,
    FireGroup,
    Job,
    MisfireMode,
    MisfirePolicy,
    Outcome,
    Overlap,
    RetentionPolicy,
    RetryPolicy,
    Run,
    RunEvent,
    RunKind,
    RunState,
    shard_of,
)
from cronwheel.schedule.calendar import spec_from_json, spec_to_json
from cronwheel.store.port import StoredSecret
from cronwheel.targets.kinds import target_from_json, target_to_json

Row = Mapping[Any, Any]  # a RowMapping, or a dict of column values


def utc(value: datetime | None) -> datetime | None:
    """An aware instant in UTC (what reading it back from the store gives)."""
    if value is None:
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError(f"naive datetime {value.isoformat()} refused: instants must be aware (UTC)")
    return value.astimezone(UTC)


# -- pairs, targets, policies --------------------------------------------------------------------


def pairs_to_json(pairs: tuple[tuple[str, str], ...]) -> list[list[str]]:
    return [[key, value] for key, value in pairs]


def pairs_from_json(data: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(key), str(value)) for key, value in data)


def retry_to_json(policy: RetryPolicy) -> dict[str, Any]:
    return {
        "max_attempts": policy.max_attempts,
        "initial_delay_s": policy.initial_delay_s,
        "multiplier": policy.multiplier,
        "max_delay_s": policy.max_delay_s,
        "jitter": policy.jitter,
    }


def retry_from_json(data: Mapping[str, Any]) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=int(data["max_attempts"]),
        initial_delay_s=float(data["initial_delay_s"]),
        multiplier=float(data["multiplier"]),
        max_delay_s=float(data["max_delay_s"]),
        jitter=bool(data["jitter"]),
    )


def misfire_to_json(policy: MisfirePolicy) -> dict[str, Any]:
    return {"mode": policy.mode.value, "grace_s": policy.grace_s, "max_catch_up": policy.max_catch_up}


def misfire_from_json(data: Mapping[str, Any]) -> MisfirePolicy:
    return MisfirePolicy(
        mode=MisfireMode(data["mode"]), grace_s=float(data["grace_s"]), max_catch_up=int(data["max_catch_up"])
    )


def retention_to_json(policy: RetentionPolicy | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    return {"keep_days": policy.keep_days, "keep_runs": policy.keep_runs}


def retention_from_json(data: Mapping[str, Any] | None) -> RetentionPolicy | None:
    if data is None:
        return None
    days, runs = data.get("keep_days"), data.get("keep_runs")
    return RetentionPolicy(None if days is None else int(days), None if runs is None else int(runs))


# -- jobs ----------------------------------------------------------------------------------------


def job_to_row(job: Job) -> dict[str, Any]:
    """Every column of ``jobs`` (``shard`` computed from the id)."""
    return {
        "id": job.id,
        "team": job.team,
        "name": job.name,
        "shard": shard_of(job.id),
        **job_definition_to_row(job),
        "next_run_at": job.next_run_at,
        "version": job.version,
        "created_at": job.created_at,
        "deleted_at": job.deleted_at,
    }


def job_definition_to_row(job: Job) -> dict[str, Any]:
    """The columns an update rewrites: everything but identity, creation, version, deletion and
    the scheduler's cursor ``next_run_at`` (``team`` and ``name`` included: a job may be renamed)."""
    return {
        "team": job.team,
        "name": job.name,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "description": job.description,
        "dst_gap": job.dst_gap,
        "dst_fold": job.dst_fold,
        "target": target_to_json(job.target),
        "payload": job.payload,
        "timeout_s": job.timeout_s,
        "retry": retry_to_json(job.retry),
        "misfire": misfire_to_json(job.misfire),
        "overlap": job.overlap.value,
        "jitter_s": job.jitter_s,
        "start_at": job.start_at,
        "end_at": job.end_at,
        "paused": job.paused,
        "pause_note": job.pause_note,
        "paused_at": job.paused_at,
        "queue": job.queue,
        "labels": pairs_to_json(job.labels),
        "retention": retention_to_json(job.retention),
        "delete_after_success": job.delete_after_success,
        "calendars": list(job.calendars),
        "calendar_shift": job.calendar_shift.value,
        "calendar_spec": None if job.calendar_spec is None else spec_to_json(job.calendar_spec),
        "updated_at": job.updated_at,
    }


def label_rows(job_id: str, labels: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """Rows of ``job_labels`` (the index behind label filters), one per distinct pair."""
    return [{"job_id": job_id, "key": key, "value": value} for key, value in dict.fromkeys(labels)]


def job_from_row(row: Row) -> Job:
    return Job(
        id=row["id"],
        team=row["team"],
        name=row["name"],
        schedule=row["schedule"],
        target=target_from_json(row["target"]),
        timezone=row["timezone"],
        description=row["description"],
        dst_gap=row["dst_gap"],
        dst_fold=row["dst_fold"],
        payload=row["payload"],
        timeout_s=float(row["timeout_s"]),
        retry=retry_from_json(row["retry"]),
        misfire=misfire_from_json(row["misfire"]),
        overlap=Overlap(row["overlap"]),
        jitter_s=float(row["jitter_s"]),
        start_at=row["start_at"],
        end_at=row["end_at"],
        paused=bool(row["paused"]),
        pause_note=row["pause_note"],
        paused_at=row["paused_at"],
        queue=row["queue"],
        labels=pairs_from_json(row["labels"]),
        retention=retention_from_json(row["retention"]),
        delete_after_success=bool(row["delete_after_success"]),
        calendars=tuple(row["calendars"]),
        calendar_shift=CalendarShift(row["calendar_shift"]),
        calendar_spec=None if row["calendar_spec"] is None else spec_from_json(row["calendar_spec"]),
        version=int(row["version"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        next_run_at=row["next_run_at"],
        deleted_at=row["deleted_at"],
    )


def due_job_from_row(row: Row) -> DueJob:
    """A row of :data:`DUE_COLUMNS` as the scheduler's slim record. The texts that many jobs share
    (team, schedule, zone, queue) are interned and equal policies are one object, so a scheduler
    holding a million jobs keeps each of them once (docs/performance.md: about 300 bytes a job)."""
    return DueJob(
        row["id"], sys.intern(row["team"]), row["version"], _shared(row["next_run_at"]),
        sys.intern(row["schedule"]), sys.intern(row["timezone"]), row["dst_gap"], row["dst_fold"],
        _misfire_of_text(row["misfire"]), Overlap(row["overlap"]), sys.intern(row["queue"]),
        row["start_at"], row["end_at"], bool(row["paused"]), row["deleted_at"], float(row["jitter_s"]),
        _spec_of_text(row["calendar_spec"]), _SHIFTS[row["calendar_shift"]],
    )  # fmt: skip


def fire_group_from_row(row: Row) -> FireGroup:
    """A row of the upcoming fires' grouped read (``store.sql.upcoming``)."""
    return FireGroup(
        sys.intern(row["team"]), int(row["jobs"]), sys.intern(row["schedule"]), sys.intern(row["timezone"]),
        row["dst_gap"], row["dst_fold"], row["start_at"], row["end_at"], _spec_of_text(row["calendar_spec"]),
        _SHIFTS[row["calendar_shift"]], row["own"], float(row["jitter_s"]),
    )  # fmt: skip


_SHIFTS = {shift.value: shift for shift in CalendarShift}  # a dict lookup: cheaper than the enum's call


_INSTANTS: dict[datetime, datetime] = {}
_INSTANTS_KEPT = 65_536


def _shared(moment: datetime | None) -> datetime | None:
    """One object for equal instants read in a row: cron cursors fall on few distinct seconds
    (whole minutes, hours), so a million jobs share a few thousand datetimes (a bounded cache,
    emptied when full)."""
    if moment is None:
        return None
    kept = _INSTANTS.get(moment)
    if kept is not None:
        return kept
    if len(_INSTANTS) >= _INSTANTS_KEPT:
        _INSTANTS.clear()
    _INSTANTS[moment] = moment
    return moment


@functools.lru_cache(maxsize=1024)
def _misfire_of_text(text: str) -> MisfirePolicy:
    """A misfire policy from its stored JSON text, decoded once per distinct text."""
    return misfire_from_json(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _spec_of_text(text: str | None) -> CalendarSpec | None:
    """A job's resolved calendar spec from its stored JSON text (NULL: no calendars), decoded once
    per distinct text: the jobs of a team that list the same calendars share one spec."""
    if text is None or text == "null":
        return None
    return spec_from_json(json.loads(text))


# -- calendars -----------------------------------------------------------------------------------


def calendar_to_row(calendar: Calendar) -> dict[str, Any]:
    return {
        "team": calendar.team,
        "name": calendar.name,
        "description": calendar.description,
        "spec": spec_to_json(calendar.spec),
        "version": calendar.version,
        "created_at": calendar.created_at,
        "updated_at": calendar.updated_at,
    }


def calendar_from_row(row: Row) -> Calendar:
    return Calendar(
        team=row["team"],
        name=row["name"],
        spec=spec_from_json(row["spec"]),
        description=row["description"],
        version=int(row["version"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


# -- runs, attempts, events ----------------------------------------------------------------------


def run_to_row(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "job_id": run.job_id,
        "kind": run.kind.value,
        "slot": run.slot,
        "dedup_key": run.dedup_key,
        "state": run.state.value,
        "queue": run.queue,
        "job_version": run.job_version,
        "reason": run.reason,
        "payload": run.payload,
        "has_payload": run.has_payload,
        "attempts": run.attempts,
        "lost_attempts": 0,
        "idempotency_key": run.idempotency_key,
        "created_at": run.created_at,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "next_attempt_at": run.next_attempt_at,
        "lease_owner": run.lease_owner,
        "lease_expires_at": run.lease_expires_at,
        "cancel_requested": run.cancel_requested,
        "traceparent": run.traceparent,
        "due_at": run.due_at,
    }


def run_from_row(row: Row) -> Run:
    return Run(
        id=row["id"],
        job_id=row["job_id"],
        kind=RunKind(row["kind"]),
        slot=row["slot"],
        state=RunState(row["state"]),
        queue=row["queue"],
        job_version=int(row["job_version"]),
        reason=row["reason"],
        payload=row["payload"],
        has_payload=bool(row["has_payload"]),
        attempts=int(row["attempts"]),
        lost_attempts=int(row["lost_attempts"]),
        idempotency_key=row["idempotency_key"],
        created_at=row["created_at"],
        queued_at=row["queued_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        next_attempt_at=row["next_attempt_at"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        cancel_requested=bool(row["cancel_requested"]),
        traceparent=row["traceparent"],
        due_at=row["due_at"],
    )


def backfill_from_row(row: Row) -> Backfill:
    return Backfill(
        id=row["id"],
        job_id=row["job_id"],
        start=row["start_at"],
        end=row["end_at"],
        total=int(row["total"]),
        cursor=row["cursor_at"],
        state=BackfillState(row["state"]),
        created=int(row["created"]),
        existing=int(row["existing"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def backfill_to_row(backfill: Backfill) -> dict[str, Any]:
    return {
        "id": backfill.id,
        "job_id": backfill.job_id,
        "start_at": backfill.start,
        "end_at": backfill.end,
        "total": backfill.total,
        "created": backfill.created,
        "existing": backfill.existing,
        "cursor_at": backfill.cursor,
        "state": backfill.state.value,
        "created_at": backfill.created_at,
        "updated_at": backfill.updated_at,
    }


def attempt_from_row(row: Row) -> Attempt:
    outcome = row["outcome"]
    return Attempt(
        run_id=row["run_id"],
        number=int(row["number"]),
        worker=row["worker"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        outcome=None if outcome is None else Outcome(outcome),
        status_code=row["status_code"],
        exit_code=row["exit_code"],
        error=row["error"],
        output=row["output"],
        retry_after_s=row["retry_after_s"],
        output_tail=row["output_tail"],
        request_headers=headers_from_json(row["request_headers"]),
        output_at=row["output_at"],
        response_headers=headers_from_json(row["response_headers"]),
    )


def headers_to_json(headers: tuple[tuple[str, str], ...] | None) -> list[list[str]] | None:
    """An attempt's sent headers as stored: ``[[name, value], ...]`` in the order sent."""
    return None if headers is None else [[name, value] for name, value in headers]


def headers_from_json(value: Any) -> tuple[tuple[str, str], ...] | None:
    if value is None:
        return None
    return tuple((str(name), str(text)) for name, text in value)


def event_from_row(row: Row) -> RunEvent:
    previous = row["previous"]
    return RunEvent(
        run_id=row["run_id"],
        at=row["at"],
        state=RunState(row["state"]),
        previous=None if previous is None else RunState(previous),
        attempt=int(row["attempt"]),
        node=row["node"],
        detail=row["detail"],
    )


# -- secrets -------------------------------------------------------------------------------------


def secret_to_row(secret: StoredSecret) -> dict[str, Any]:
    return {
        "team": secret.team,
        "name": secret.name,
        "key_id": secret.key_id,
        "value": secret.value,
        "created_at": secret.created_at,
        "updated_at": secret.updated_at,
    }


def secret_from_row(row: Row) -> StoredSecret:
    return StoredSecret(
        team=row["team"],
        name=row["name"],
        key_id=row["key_id"],
        value=bytes(row["value"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


# -- cursors -------------------------------------------------------------------------------------


def encode_cursor(*key: str | int) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key), separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str, shape: tuple[type, ...]) -> tuple[Any, ...]:
    """The key a cursor encodes, checked against ``shape`` (the type of each part)."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, UnicodeError):
        key = None
    if not (
        isinstance(key, list)
        and len(key) == len(shape)
        and all(type(part) is kind for part, kind in zip(key, shape, strict=True))
    ):
        raise InvalidInputError("invalid page cursor: not one this API returned")
    return tuple(key)


# -- API tokens ----------------------------------------------------------------------------------


def token_to_row(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "team": token.team,
        "scopes": sorted(scope.value for scope in token.scopes),
        "digest": token.digest,
        "created_at": token.created_at,
        "created_by": token.created_by,
        "expires_at": token.expires_at,
        "last_used_at": token.last_used_at,
        "revoked_at": token.revoked_at,
    }


def token_from_row(row: Row) -> ApiToken:
    return ApiToken(
        id=row["id"],
        name=row["name"],
        team=row["team"],
        scopes=frozenset(Scope(scope) for scope in row["scopes"]),
        digest=row["digest"],
        created_at=row["created_at"],
        created_by=row["created_by"],
        expires_at=row["expires_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
    )
