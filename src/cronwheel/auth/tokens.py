"""API tokens: how one is made, what is kept of it, and how a presented one is checked.

A token reads ``cw_<id>_<secret>``:

* ``<id>``: 12 random hex digits, the primary key of its row, so that a presented token is found
  by one primary-key read (never a scan, never a comparison with every stored digest). The id is
  not secret: it is listed, logged and named in the audit log.
* ``<secret>``: ``secrets.token_urlsafe(32)``, 256 random bits.

The store keeps the SHA-256 digest of the whole token, never the token: it is shown once, when it
is made. A fast hash is the right one here. Slow password hashes (bcrypt, scrypt, Argon2) exist to
make guessing *low-entropy* secrets expensive after a leak of their digests; a 256-bit random
secret cannot be guessed however fast each guess is (2^256 trials), so a leaked digest gives
nothing, and a fast hash keeps the check of every request in microseconds. No key (pepper) is
needed for the same reason, which also spares a cluster one more secret to distribute. Digests
are compared in constant time (:func:`hmac.compare_digest`).

The records are pure: no store, no clock (the caller passes ``now``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from cronwheel.auth.identity import Caller, CallerKind, Scope
from cronwheel.errors import InvalidInputError, UnauthenticatedError

PREFIX = "cw_"
_FORM = re.compile(r"^cw_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
TOUCH_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often per token

TokenState = Literal["active", "expired", "revoked"]


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A stored token (its digest, never the token itself). ``team`` None: every team."""

    id: str
    name: str
    team: str | None
    scopes: frozenset[Scope]
    digest: str  # hex SHA-256 of the whole token
    created_at: datetime
    created_by: str | None = None  # the id of the token that made it; None: made on the server itself
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None

    def state(self, now: datetime) -> TokenState:
        """``revoked``, ``expired`` or ``active`` at ``now``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def caller(self) -> Caller:
        """The caller a request made with this token is."""
        teams = None if self.team is None else frozenset({self.team})
        return Caller(CallerKind.TOKEN, self.id, self.name, self.scopes, teams)

    def needs_touch(self, now: datetime) -> bool:
        """Whether ``last_used_at`` is stale enough to be written again (once a minute at most:
        a request made with a token must not cost a write each time)."""
        return self.last_used_at is None or now - self.last_used_at >= TOUCH_EVERY


def issue(
    name: str,
    team: str | None,
    scopes: Iterable[Scope],
    now: datetime,
    *,
    expires_at: datetime | None = None,
    created_by: str | None = None,
) -> tuple[ApiToken, str]:
    """A new token: its record, to store, and the token itself, to show once."""
    chosen = frozenset(scopes)
    if not chosen:
        raise InvalidInputError("a token needs at least one scope (read, write, trigger, admin)")
    if expires_at is not None and expires_at <= now:
        raise InvalidInputError("a token's expiry must be in the future")
    token_id = secrets.token_hex(6)
    text = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    record = ApiToken(
        id=token_id,
        name=name,
        team=team,
        scopes=chosen,
        digest=digest(text),
        created_at=now,
        created_by=created_by,
        expires_at=expires_at,
    )
    return record, text


def token_id(text: str) -> str | None:
    """The id of a token of this form, or None for anything else (another kind of credential)."""
    match = _FORM.match(text)
    return None if match is None else match.group(1)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check(token: ApiToken | None, text: str, now: datetime) -> Caller:
    """The caller ``text`` authenticates as, given the stored ``token`` of its id (None: no such
    id). Unknown ids and wrong secrets get one answer, so that neither can be told apart;
    expired and revoked tokens say so (whoever sends one holds the real token)."""
    if token is None or not hmac.compare_digest(token.digest, digest(text)):
        raise UnauthenticatedError("invalid token")
    state = token.state(now)
    if state != "active":
        raise UnauthenticatedError(f"token {token.id} is {state}")
    return token.caller()
