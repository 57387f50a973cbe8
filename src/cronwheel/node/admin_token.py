"""The embedded server's admin token: made on the first start over a SQLite file and written to the
file the CLI finds (:mod:`cronwheel.auth.localtoken` says where), replaced when it no longer works.
The token is never printed or logged."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from cronwheel.audit import SERVER, AuditAction
from cronwheel.auth import tokens
from cronwheel.auth.identity import Scope
from cronwheel.auth.localtoken import pointer_file, read_token, token_file, write_private
from cronwheel.errors import NotFoundError, UnauthenticatedError
from cronwheel.store.port import TokenStore


async def issue_admin(store: TokenStore, now: datetime, name: str) -> str:
    """Store a new admin token of every team (made on the server itself: no ``created_by``) and
    return it: the first token of a server (``cronwheel tokens create --bootstrap``, the embedded
    server's file)."""
    record, text = tokens.issue(name, None, [Scope.ADMIN], now)
    entry = SERVER.entry(AuditAction.TOKEN_CREATE, now, None, ("token", record.id, record.name))
    await store.create_token(record, audit=entry)
    return text


async def ensure(
    store: TokenStore, database_url: str, now: datetime, url: str, env: Mapping[str, str]
) -> Path | None:
    """Make sure the embedded server's token file holds a working admin token (a new one when it
    is missing or no longer works), and leave the pointer for ``url``. Returns the file (None:
    the store is not a SQLite file)."""
    path = token_file(database_url)
    if path is None:
        return None
    current = read_token(path)
    if current is None or not await _works(store, current, now):
        write_private(path, await issue_admin(store, now, "local admin"))
    elif path.stat().st_mode & 0o077:  # made readable by others since: take that back
        write_private(path, current)
    pointer = pointer_file(url, env)
    if pointer is not None:
        write_private(pointer, f"{path}\n")
    return path


async def _works(store: TokenStore, text: str, now: datetime) -> bool:
    token_id = tokens.token_id(text)
    if token_id is None:
        return False
    try:
        tokens.check(await store.get_token(token_id), text, now)
    except (NotFoundError, UnauthenticatedError):
        return False
    return True
