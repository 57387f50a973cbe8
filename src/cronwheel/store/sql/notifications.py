"""Notifications in the store: rules, the inbox of terminal runs, each job's notification state
and the outbox (:mod:`cronwheel.notifications`).

A run's terminal state puts its id in ``notification_inbox`` in the transaction that writes it
(:func:`cronwheel.store.sql.bulk.note_outcomes`). :func:`process_inbox` claims inbox rows
(``DELETE ... RETURNING``: two processors never take the same row), and in the same transaction
reads the jobs' rules and state, decides with the pure :func:`cronwheel.notifications.decide.events`,
writes the new state and the outbox rows. So a notification is decided exactly once per state
change, and written if and only if that decision commits. Delivery is at-least-once from the
outbox (:func:`due`, :func:`delivered`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import and_, delete, false, insert, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.audit import AuditEntry
from cronwheel.model import Job, Run, RunState
from cronwheel.notifications.decide import events, run_health
from cronwheel.notifications.message import Delivery, Notification, Observation, channel_key, notification_id
from cronwheel.notifications.rules import (
    Channel,
    Condition,
    Event,
    Rule,
    channel_to_json,
    job_scope,
    rules_from_json,
    rules_to_json,
    team_scope,
)
from cronwheel.store import codec
from cronwheel.store.driver import upsert
from cronwheel.store.schema import (
    jobs,
    notification_health,
    notification_inbox,
    notification_outbox,
    notification_rules,
    runs,
)
from cronwheel.store.sql import audit
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks

PENDING, SENT, FAILED = "pending", "sent", "failed"


# -- rules -------------------------------------------------------------------------------------------


async def get_rules(tx: Transactions, scope: str) -> tuple[Rule, ...] | None:
    async with tx.read() as connection:
        value = await connection.scalar(
            select(notification_rules.c.rules).where(notification_rules.c.scope == scope)
        )
    return None if value is None else rules_from_json(value)


async def put_rules(
    tx: Transactions,
    scope: str,
    team: str,
    job_id: str | None,
    rules: tuple[Rule, ...],
    now: datetime,
    entry: AuditEntry | None = None,
) -> None:
    """Store ``scope``'s rules; ``entry`` (the audit log's) is appended in the same transaction,
    with the rules before and after (URLs cut to their endpoint: a Slack URL's path is its token)."""
    async with tx.write() as connection:
        before = await _stored(connection, scope)
        await connection.execute(delete(notification_rules).where(notification_rules.c.scope == scope))
        await connection.execute(
            insert(notification_rules).values(
                scope=scope, team=team, job_id=job_id, rules=rules_to_json(rules), updated_at=now
            )
        )
        if entry is not None:
            await audit.write(connection, [entry.changed(_snapshot(before), _snapshot(rules_to_json(rules)))])


async def delete_rules(tx: Transactions, scope: str, entry: AuditEntry | None = None) -> bool:
    """Drop ``scope``'s rules; whether there were any (``entry`` is appended only then)."""
    async with tx.write() as connection:
        before = await _stored(connection, scope)
        result = await connection.execute(
            delete(notification_rules).where(notification_rules.c.scope == scope)
        )
        if entry is not None and before is not None:
            await audit.write(connection, [entry.changed(_snapshot(before), None)])
    return bool(result.rowcount)


async def _stored(connection: AsyncConnection, scope: str) -> list[dict[str, Any]] | None:
    value = await connection.scalar(
        select(notification_rules.c.rules).where(notification_rules.c.scope == scope)
    )
    return None if value is None else list(value)


def _snapshot(rules: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """Rules as the audit log keeps them: every URL cut to scheme, host and port (a secret
    reference as it is: a name)."""
    if rules is None:
        return None
    kept = []
    for rule in rules:
        channels = [
            {**channel, "url": _endpoint(channel["url"])} if isinstance(channel.get("url"), str) else channel
            for channel in rule["channels"]
        ]
        kept.append({**rule, "channels": channels})
    return {"rules": kept}


def _endpoint(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{'' if parts.port is None else f':{parts.port}'}/..."


async def _effective(
    connection: AsyncConnection, found: Sequence[tuple[str, str]]
) -> dict[str, tuple[Rule, ...]]:
    """Each job's rules, by job id: its own, else its team's default (jobs with neither absent)."""
    scopes = {job_scope(job_id) for job_id, _ in found} | {team_scope(team) for _, team in found}
    stored: dict[str, tuple[Rule, ...]] = {}
    for chunk in chunks(sorted(scopes), CHUNK):
        result = await connection.execute(
            select(notification_rules.c.scope, notification_rules.c.rules).where(
                notification_rules.c.scope.in_(chunk)
            )
        )
        stored.update((scope, rules_from_json(value)) for scope, value in result.all())
    effective = {}
    for job_id, team in found:
        rules = stored.get(job_scope(job_id), stored.get(team_scope(team)))
        if rules:
            effective[job_id] = rules
    return effective


# -- deciding ----------------------------------------------------------------------------------------


async def process_inbox(tx: Transactions, now: datetime, limit: int) -> int:
    """Claim up to ``limit`` inbox rows and decide their notifications in one transaction;
    returns how many inbox rows were taken (0: the inbox is empty)."""
    async with tx.write() as connection:
        oldest = select(notification_inbox.c.id).order_by(notification_inbox.c.id).limit(limit)
        result = await connection.execute(
            delete(notification_inbox)
            .where(notification_inbox.c.id.in_(oldest.scalar_subquery()))
            .returning(notification_inbox.c.id, notification_inbox.c.run_id)
        )
        claimed = sorted(result.all())
        if not claimed:
            return 0
        run_ids = [run_id for _, run_id in claimed]
        done: dict[str, tuple[Run, str, str]] = {}
        for chunk in chunks(sorted(set(run_ids)), CHUNK):
            rows = await connection.execute(
                select(runs, jobs.c.team, jobs.c.name.label("job_name"))
                .join(jobs, jobs.c.id == runs.c.job_id)
                .where(runs.c.id.in_(chunk), jobs.c.deleted_at.is_(None))
            )
            done.update(
                (row["id"], (codec.run_from_row(row), row["team"], row["job_name"]))
                for row in rows.mappings()
            )
        rules = await _effective(connection, sorted({(run.job_id, team) for run, team, _ in done.values()}))
        observations = []
        for run_id in run_ids:  # inbox order: the order the states were written
            if run_id not in done or done[run_id][0].job_id not in rules:
                continue
            run, team, name = done[run_id]
            job_rules = rules[run.job_id]
            late = tuple(rule for rule in job_rules if Condition.LATE in rule.conditions)
            health = run_health(run.state, run.kind, run.slot, run.queued_at, late)
            detail = run.reason if run.state is RunState.FAILED else None
            observations.append(
                Observation(
                    run.job_id,
                    team,
                    name,
                    job_rules,
                    health,
                    run.id,
                    run.id,
                    run.slot,
                    run.state.value,
                    detail,
                )
            )
        await observe(connection, observations, now)
        return len(claimed)


async def observe(connection: AsyncConnection, observations: Sequence[Observation], now: datetime) -> int:
    """Apply ``observations`` (in order) to the jobs' stored state and write the notifications
    their changes call for, in the caller's transaction; returns how many outbox rows were written."""
    if not observations:
        return 0
    state = await _health(connection, sorted({o.job_id for o in observations}))
    changed: dict[tuple[str, str], str] = {}
    outbox: dict[str, dict[str, Any]] = {}
    for seen in observations:
        previous = state.setdefault(seen.job_id, {})
        for rule in seen.rules:
            for event in events(previous, seen.health, rule):
                notification = _notification(seen, event, now)
                for channel in rule.channels:
                    row = _outbox_row(notification, channel, now)
                    outbox.setdefault(row["id"], row)
        for aspect, value in seen.health.items():
            if previous.get(aspect) != value:
                changed[(seen.job_id, aspect)] = value
        previous.update(seen.health)
    if changed:
        rows = [{"job_id": j, "aspect": a, "value": v, "since": now} for (j, a), v in sorted(changed.items())]
        health = upsert(connection.dialect, notification_health)
        await connection.execute(
            health.on_conflict_do_update(
                index_elements=["job_id", "aspect"],
                set_={"value": health.excluded.value, "since": health.excluded.since},
            ),
            rows,
        )
    fresh = await _not_yet_written(connection, sorted(outbox))
    if fresh:
        await _write_outbox(connection, [outbox[key] for key in fresh])
    return len(fresh)


async def _write_outbox(connection: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """Insert outbox rows; one another transaction wrote meanwhile stays as it is. Writes are
    idempotent so that two notifiers (one about to lose the watchdog duty, still in its pass)
    can never fail each other with a conflict."""
    statement = upsert(connection.dialect, notification_outbox).on_conflict_do_nothing(index_elements=["id"])
    await connection.execute(statement, rows)


async def _health(connection: AsyncConnection, job_ids: list[str]) -> dict[str, dict[str, str]]:
    state: dict[str, dict[str, str]] = {}
    for chunk in chunks(job_ids, CHUNK):
        result = await connection.execute(
            select(notification_health.c.job_id, notification_health.c.aspect, notification_health.c.value)
            .where(notification_health.c.job_id.in_(chunk))
        )  # fmt: skip
        for job_id, aspect, value in result.all():
            state.setdefault(job_id, {})[aspect] = value
    return state


async def _not_yet_written(connection: AsyncConnection, ids: list[str]) -> list[str]:
    """Of ``ids``, those the outbox does not hold (a notification decided again keeps its id)."""
    existing: set[str] = set()
    for chunk in chunks(ids, CHUNK):
        result = await connection.execute(
            select(notification_outbox.c.id).where(notification_outbox.c.id.in_(chunk))
        )
        existing.update(result.scalars())
    return [key for key in ids if key not in existing]


def _notification(seen: Observation, event: Event, now: datetime) -> Notification:
    return Notification(
        id=notification_id(seen.job_id, event, seen.subject),
        event=event,
        team=seen.team,
        job_id=seen.job_id,
        job_name=seen.job_name,
        at=now,
        run_id=seen.run_id,
        slot=seen.slot,
        state=seen.state,
        detail=seen.detail,
    )


def _outbox_row(notification: Notification, channel: Channel, now: datetime) -> dict[str, Any]:
    return {
        "id": f"{notification.id}:{channel_key(channel)}",
        "notification_id": notification.id,
        "team": notification.team,
        "job_id": notification.job_id,
        "event": notification.event.value,
        "channel": channel_to_json(channel),
        "message": notification.to_json(),
        "created_at": now,
        "state": PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "finished_at": None,
        "last_error": None,
    }


async def enqueue(
    tx: Transactions, notification: Notification, channels: Sequence[Channel], now: datetime
) -> int:
    """Write ``notification`` to the outbox for ``channels`` (``cronwheel notifications test``)."""
    rows = {row["id"]: row for row in (_outbox_row(notification, channel, now) for channel in channels)}
    async with tx.write() as connection:
        fresh = await _not_yet_written(connection, sorted(rows))
        if fresh:
            await _write_outbox(connection, [rows[key] for key in fresh])
    return len(fresh)


# -- the dead-man's switch ---------------------------------------------------------------------------


async def watching(tx: Transactions, condition: Condition) -> list[tuple[Job, tuple[Rule, ...]]]:
    """Live, unpaused jobs whose rules (their own, else their team's) ask for ``condition``."""
    async with tx.read() as connection:
        result = await connection.execute(
            select(notification_rules.c.team, notification_rules.c.job_id, notification_rules.c.rules)
        )
        rows = [(team, job_id, rules_from_json(value)) for team, job_id, value in result.all()]
        wanted = [
            (team, job_id) for team, job_id, rules in rows if any(condition in r.conditions for r in rules)
        ]
        if not wanted:
            return []
        teams = sorted({team for team, job_id in wanted if job_id is None})
        job_ids = sorted({job_id for _, job_id in wanted if job_id is not None})
        live = and_(jobs.c.deleted_at.is_(None), jobs.c.paused == false())
        found = await connection.execute(
            select(jobs).where(live, or_(jobs.c.team.in_(teams), jobs.c.id.in_(job_ids))).order_by(jobs.c.id)
        )
        candidates = [codec.job_from_row(row) for row in found.mappings()]
        rules = await _effective(connection, [(job.id, job.team) for job in candidates])
    return [
        (job, rules[job.id])
        for job in candidates
        if job.id in rules and any(condition in r.conditions for r in rules[job.id])
    ]


async def terminal_slots(
    tx: Transactions, slots: Sequence[tuple[str, datetime]]
) -> set[tuple[str, datetime]]:
    """Which (job id, slot) pairs have a run in a terminal state (one query per chunk, on the
    (job_id, slot) index)."""
    found: set[tuple[str, datetime]] = set()
    terminal = [state.value for state in RunState if state.terminal]
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(slots)), CHUNK):
            result = await connection.execute(
                select(runs.c.job_id, runs.c.slot).where(
                    tuple_(runs.c.job_id, runs.c.slot).in_(list(chunk)), runs.c.state.in_(terminal)
                )
            )
            found.update((job_id, slot) for job_id, slot in result.all())
    return found


async def record(tx: Transactions, observations: Sequence[Observation], now: datetime) -> int:
    """:func:`observe` in a transaction of its own (the dead-man's switch's observations)."""
    async with tx.write() as connection:
        return await observe(connection, observations, now)


# -- delivery ----------------------------------------------------------------------------------------


async def due(tx: Transactions, now: datetime, limit: int) -> list[Delivery]:
    async with tx.read() as connection:
        result = await connection.execute(
            select(notification_outbox)
            .where(notification_outbox.c.state == PENDING, notification_outbox.c.next_attempt_at <= now)
            .order_by(notification_outbox.c.next_attempt_at, notification_outbox.c.id)
            .limit(limit)
        )
        rows = result.mappings().all()
    return [
        Delivery(row["id"], Notification.from_json(row["message"]), _channel(row["channel"]), row["attempts"])
        for row in rows
    ]


def _channel(value: dict[str, Any]) -> Channel:
    return rules_from_json([{"conditions": ["failure"], "channels": [value]}])[0].channels[0]


async def delivered(
    tx: Transactions, delivery_id: str, now: datetime, error: str | None, retry_at: datetime | None
) -> None:
    """Record one try: sent (``error`` None), to try again at ``retry_at``, or given up."""
    state = SENT if error is None else (PENDING if retry_at is not None else FAILED)
    async with tx.write() as connection:
        await connection.execute(
            update(notification_outbox)
            .where(notification_outbox.c.id == delivery_id, notification_outbox.c.state == PENDING)
            .values(
                state=state,
                attempts=notification_outbox.c.attempts + 1,
                next_attempt_at=retry_at,
                finished_at=None if state == PENDING else now,
                last_error=None if error is None else error[:500],
            )
        )


async def prune(tx: Transactions, before: datetime) -> int:
    """Delete the outbox rows delivered or given up before ``before``; how many."""
    async with tx.write() as connection:
        result = await connection.execute(
            delete(notification_outbox).where(
                notification_outbox.c.state != PENDING, notification_outbox.c.finished_at < before
            )
        )
    return int(result.rowcount or 0)


async def outbox(tx: Transactions, job_id: str | None = None) -> list[dict[str, Any]]:
    """The outbox rows (of one job), oldest first: for tests and ``notifications list``."""
    statement = select(notification_outbox).order_by(
        notification_outbox.c.created_at, notification_outbox.c.id
    )
    if job_id is not None:
        statement = statement.where(notification_outbox.c.job_id == job_id)
    async with tx.read() as connection:
        return [dict(row) for row in (await connection.execute(statement)).mappings()]
