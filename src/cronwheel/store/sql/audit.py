"""The audit log (:mod:`cronwheel.audit`): appending entries, in the caller's transaction or in one
of their own, and reading them newest first, a page at a time, within the caller's walls.

Nothing here updates an entry. :func:`prune` deletes the entries older than an instant: it is the
operator's retention (``cronwheel audit prune``, on the database directly), never reachable from
the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.audit import AuditAction, AuditEntry, AuditQuery
from cronwheel.store import codec
from cronwheel.store.port import Page
from cronwheel.store.schema import audit_log, from_micros, to_micros
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import check_limit

# -- writes ----------------------------------------------------------------------------------------


async def append(tx: Transactions, entries: Sequence[AuditEntry]) -> None:
    """Append ``entries`` in a transaction of their own (what is no store write's: refusals,
    re-encryption's summary)."""
    if entries:
        async with tx.write() as connection:
            await write(connection, entries)


async def write(connection: AsyncConnection, entries: Sequence[AuditEntry | None]) -> None:
    """Append ``entries`` (None ones skipped) in the caller's transaction: they commit with the
    change they record, or not at all."""
    rows = [_to_row(entry) for entry in entries if entry is not None]
    if rows:
        await connection.execute(insert(audit_log), rows)


async def prune(tx: Transactions, before: datetime) -> int:
    """Delete the entries older than ``before``; how many were deleted."""
    async with tx.write() as connection:
        result = await connection.execute(delete(audit_log).where(audit_log.c.at < before))
    return int(result.rowcount or 0)


# -- reads -----------------------------------------------------------------------------------------


async def list_page(tx: Transactions, query: AuditQuery) -> Page[AuditEntry]:
    check_limit(query.limit)
    statement = select(audit_log).where(*_matching(query))
    if query.cursor is not None:
        micros, after_id = codec.decode_cursor(query.cursor, (int, str))
        at = from_micros(micros)
        statement = statement.where(
            or_(audit_log.c.at < at, and_(audit_log.c.at == at, audit_log.c.id < after_id))
        )
    statement = statement.order_by(audit_log.c.at.desc(), audit_log.c.id.desc()).limit(query.limit + 1)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).mappings().all()
    items = [_from_row(row) for row in rows[: query.limit]]
    if len(rows) <= query.limit:
        return Page(items)
    last = items[-1]
    return Page(items, codec.encode_cursor(to_micros(last.at), last.id))


def _matching(query: AuditQuery) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if query.team is not None:
        conditions.append(audit_log.c.team == query.team)
    if query.teams is not None:  # a team-less entry is no one team's: never within walls
        conditions.append(audit_log.c.team.in_(sorted(set(query.teams))))
    if query.action is not None:
        if "." in query.action:
            conditions.append(audit_log.c.action == query.action)
        else:  # a family: "job" is every job.* action
            conditions.append(audit_log.c.action.startswith(query.action + ".", autoescape=True))
    if query.actor is not None:
        conditions.append(audit_log.c.actor_id == query.actor)
    if query.target is not None:
        conditions.append(or_(audit_log.c.target_id == query.target, audit_log.c.target_name == query.target))
    if query.since is not None:
        conditions.append(audit_log.c.at >= query.since)
    if query.until is not None:
        conditions.append(audit_log.c.at < query.until)
    return conditions


# -- rows ------------------------------------------------------------------------------------------


def _to_row(entry: AuditEntry) -> dict[str, object]:
    return {
        "id": entry.id,
        "at": entry.at,
        "team": entry.team,
        "action": entry.action.value,
        "actor_kind": entry.actor_kind,
        "actor_id": entry.actor_id,
        "actor_name": entry.actor_name,
        "client": entry.client,
        "target_kind": entry.target_kind,
        "target_id": entry.target_id,
        "target_name": entry.target_name,
        "outcome": entry.outcome,
        "status": entry.status,
        "detail": entry.detail,
        "before": entry.before,
        "after": entry.after,
    }


def _from_row(row: codec.Row) -> AuditEntry:
    return AuditEntry(
        id=row["id"],
        at=row["at"],
        team=row["team"],
        action=AuditAction(row["action"]),
        actor_kind=row["actor_kind"],
        actor_id=row["actor_id"],
        actor_name=row["actor_name"],
        client=row["client"],
        target_kind=row["target_kind"],
        target_id=row["target_id"],
        target_name=row["target_name"],
        outcome=row["outcome"],
        status=row["status"],
        detail=row["detail"],
        before=row["before"],
        after=row["after"],
    )
