"""API tokens: their rows (the digest of each token, never the token), listing, revocation, and the
last-used stamp.

The API reads a token on every request (one primary-key read: revocation takes effect at once, in
every api process, with no cache to expire) and writes ``last_used_at`` at most once a minute per
token (a conditional UPDATE, so that concurrent requests write it once).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import ColumnElement, and_, insert, or_, select, update

from cronwheel.audit import AuditEntry
from cronwheel.auth.tokens import ApiToken
from cronwheel.errors import ConflictError, NotFoundError
from cronwheel.store import codec
from cronwheel.store.port import Page, TokenQuery
from cronwheel.store.schema import api_tokens, from_micros, to_micros
from cronwheel.store.snapshots import token_snapshot
from cronwheel.store.sql import audit
from cronwheel.store.sql.tx import Transactions
from cronwheel.store.sql.where import check_limit, instant


async def create(tx: Transactions, token: ApiToken, entry: AuditEntry | None = None) -> ApiToken:
    try:
        async with tx.write() as connection:
            await connection.execute(insert(api_tokens).values(codec.token_to_row(token)))
            if entry is not None:
                await audit.write(connection, [entry.changed(None, token_snapshot(token))])
    except ConflictError:
        raise ConflictError(f"a token with id {token.id} exists") from None
    return await get(tx, token.id)


async def get(tx: Transactions, token_id: str) -> ApiToken:
    async with tx.read() as connection:
        result = await connection.execute(select(api_tokens).where(api_tokens.c.id == token_id))
        row = result.mappings().first()
    if row is None:
        raise NotFoundError(f"token {token_id} not found")
    return codec.token_from_row(row)


async def list_page(tx: Transactions, query: TokenQuery) -> Page[ApiToken]:
    check_limit(query.limit)
    statement = select(api_tokens).where(*_matching(query))
    if query.cursor is not None:
        micros, after_id = codec.decode_cursor(query.cursor, (int, str))
        created = from_micros(micros)
        statement = statement.where(
            or_(
                api_tokens.c.created_at > created,
                and_(api_tokens.c.created_at == created, api_tokens.c.id > after_id),
            )
        )
    statement = statement.order_by(api_tokens.c.created_at, api_tokens.c.id).limit(query.limit + 1)
    async with tx.read() as connection:
        rows = (await connection.execute(statement)).mappings().all()
    items = [codec.token_from_row(row) for row in rows[: query.limit]]
    if len(rows) <= query.limit:
        return Page(items)
    last = items[-1]
    return Page(items, codec.encode_cursor(to_micros(last.created_at), last.id))


def _matching(query: TokenQuery) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if query.team is not None:
        conditions.append(api_tokens.c.team == query.team)
    if query.teams is not None:
        conditions.append(api_tokens.c.team.in_(sorted(set(query.teams))))
    if not query.include_revoked:
        conditions.append(api_tokens.c.revoked_at.is_(None))
    return conditions


async def revoke(tx: Transactions, token_id: str, now: datetime, entry: AuditEntry | None = None) -> ApiToken:
    """Revoke the token; ``entry`` is appended in the same transaction when this revoked it (a
    token revoked already changes nothing)."""
    async with tx.write() as connection:
        result = await connection.execute(
            update(api_tokens)
            .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
            .values(revoked_at=instant(now))
            .returning(*api_tokens.c)
        )
        row = result.mappings().first()
        if row is not None and entry is not None:
            after = codec.token_from_row(row)
            before = token_snapshot(replace(after, revoked_at=None))
            await audit.write(connection, [entry.changed(before, token_snapshot(after))])
    return await get(tx, token_id)


async def touch(tx: Transactions, token_id: str, now: datetime, stale_before: datetime) -> bool:
    async with tx.write_each() as connection:
        result = await connection.execute(
            update(api_tokens)
            .where(
                api_tokens.c.id == token_id,
                or_(api_tokens.c.last_used_at.is_(None), api_tokens.c.last_used_at <= stale_before),
            )
            .values(last_used_at=now)
        )
    return bool(result.rowcount == 1)
