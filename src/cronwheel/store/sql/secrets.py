"""Team secrets: sealed values by (team, name). The store never sees a value in clear; sealing
and opening are :mod:`cronwheel.secrets`'s.

``put`` is an upsert (``INSERT ... ON CONFLICT DO UPDATE``), so two first writes of one name
that race on PostgreSQL end as one row, the last write's, instead of a unique violation.
``rekey`` is conditional on the sealed bytes read, so re-encryption never overwrites a value that
someone set meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import and_, delete, or_, select, update

from cronwheel.audit import AuditEntry
from cronwheel.errors import NotFoundError
from cronwheel.store import codec
from cronwheel.store.driver import upsert
from cronwheel.store.port import Page, StoredSecret
from cronwheel.store.schema import secrets
from cronwheel.store.snapshots import secret_snapshot
from cronwheel.store.sql import audit
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks
from cronwheel.store.sql.where import check_limit


async def put(
    tx: Transactions, secret: StoredSecret, now: datetime, entry: AuditEntry | None = None
) -> tuple[StoredSecret, bool]:
    updated_at = secret.updated_at or now
    secret = replace(secret, created_at=secret.created_at or updated_at, updated_at=updated_at)
    async with tx.write() as connection:
        existing = (
            await connection.execute(
                select(secrets.c.key_id, secrets.c.updated_at).where(
                    secrets.c.team == secret.team, secrets.c.name == secret.name
                )
            )
        ).first()
        insert = upsert(connection.dialect, secrets).values(codec.secret_to_row(secret))
        statement = insert.on_conflict_do_update(
            index_elements=[secrets.c.team, secrets.c.name],
            set_={
                "key_id": insert.excluded.key_id,
                "value": insert.excluded.value,
                "updated_at": insert.excluded.updated_at,
            },
        ).returning(*secrets.c)
        row = (await connection.execute(statement)).mappings().one()
        stored = codec.secret_from_row(row)
        if entry is not None:
            before = None if existing is None else secret_snapshot(existing.key_id, existing.updated_at)
            after = secret_snapshot(stored.key_id, stored.updated_at)
            await audit.write(connection, [entry.changed(before, after)])
    return stored, existing is None


async def get_many(tx: Transactions, team: str, names: Sequence[str]) -> dict[str, StoredSecret]:
    found: dict[str, StoredSecret] = {}
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(names)), CHUNK):
            result = await connection.execute(
                select(secrets).where(secrets.c.team == team, secrets.c.name.in_(chunk))
            )
            found.update((row["name"], codec.secret_from_row(row)) for row in result.mappings())
    return found


async def list_page(tx: Transactions, team: str, limit: int, cursor: str | None) -> Page[StoredSecret]:
    check_limit(limit)
    statement = select(secrets).where(secrets.c.team == team)
    if cursor is not None:
        statement = statement.where(secrets.c.name > codec.decode_cursor(cursor, (str,))[0])
    async with tx.read() as connection:
        rows = (
            (await connection.execute(statement.order_by(secrets.c.name).limit(limit + 1))).mappings().all()
        )
    items = [codec.secret_from_row(row) for row in rows[:limit]]
    return Page(items, codec.encode_cursor(items[-1].name) if len(rows) > limit else None)


async def remove(tx: Transactions, team: str, name: str, entry: AuditEntry | None = None) -> StoredSecret:
    async with tx.write() as connection:
        result = await connection.execute(
            delete(secrets).where(secrets.c.team == team, secrets.c.name == name).returning(*secrets.c)
        )
        row = result.mappings().first()
        if row is not None and entry is not None:
            before = secret_snapshot(row["key_id"], row["updated_at"])
            await audit.write(connection, [entry.changed(before, None)])
    if row is None:
        raise NotFoundError(f"team {team!r} has no secret named {name!r}")
    return codec.secret_from_row(row)


async def to_rekey(
    tx: Transactions, key_id: str, after: tuple[str, str] | None, limit: int
) -> list[StoredSecret]:
    check_limit(limit)
    statement = select(secrets).where(secrets.c.key_id != key_id)
    if after is not None:
        team, name = after
        statement = statement.where(
            or_(secrets.c.team > team, and_(secrets.c.team == team, secrets.c.name > name))
        )
    async with tx.read() as connection:
        result = await connection.execute(statement.order_by(secrets.c.team, secrets.c.name).limit(limit))
        return [codec.secret_from_row(row) for row in result.mappings()]


async def rekey(tx: Transactions, secret: StoredSecret, key_id: str, value: bytes) -> bool:
    async with tx.write() as connection:
        result = await connection.execute(
            update(secrets)
            .where(
                secrets.c.team == secret.team,
                secrets.c.name == secret.name,
                secrets.c.key_id == secret.key_id,
                secrets.c.value == secret.value,
            )
            .values(key_id=key_id, value=value)
        )
    return bool(result.rowcount == 1)
