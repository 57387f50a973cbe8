"""The audit log's records: who did what to which object of which team, when, from where, and how
it ended.

An :class:`AuditEntry` is appended for every change made through the API (a job created, edited,
paused, resumed, triggered, backfilled or deleted; a backfill cancelled; a token made or revoked;
a secret set or deleted; secrets re-encrypted) and for every refused request (401, 403, and a
404 answered because the object is behind another team's wall). Entries are never updated or
deleted through the API.

What a change looked like is kept as ``before``/``after`` snapshots that never hold a
credential; the store takes them (:mod:`cronwheel.store.snapshots`) and writes the entry in the
transaction of the change it records where there is one (:mod:`cronwheel.store.sql.audit`). The
records here are pure: no store, no clock.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronwheel.auth.identity import Caller
from cronwheel.model import new_id


class AuditAction(enum.StrEnum):
    JOB_CREATE = "job.create"
    JOB_UPDATE = "job.update"
    JOB_DELETE = "job.delete"
    JOB_PAUSE = "job.pause"
    JOB_RESUME = "job.resume"
    JOB_TRIGGER = "job.trigger"
    JOB_BACKFILL = "job.backfill"
    JOB_BACKFILL_CANCEL = "job.backfill_cancel"
    TOKEN_CREATE = "token.create"  # noqa: S105 - an action's name, not a secret
    TOKEN_REVOKE = "token.revoke"  # noqa: S105
    SECRET_SET = "secret.set"  # noqa: S105
    SECRET_DELETE = "secret.delete"  # noqa: S105
    SECRETS_REENCRYPT = "secrets.reencrypt"
    CALENDAR_CREATE = "calendar.create"
    CALENDAR_UPDATE = "calendar.update"
    CALENDAR_DELETE = "calendar.delete"
    NOTIFICATIONS_SET = "notifications.set"  # a team's default or a job's own rules replaced
    NOTIFICATIONS_DELETE = "notifications.delete"  # a job's own rules dropped (or a team's default)
    AUTH_UNAUTHENTICATED = "auth.unauthenticated"  # 401: no caller
    AUTH_FORBIDDEN = "auth.forbidden"  # 403: the caller lacks a scope, or may not set a field
    AUTH_HIDDEN = "auth.hidden"  # 404: the object is another team's (answered as missing)


FAILURES = frozenset({AuditAction.AUTH_UNAUTHENTICATED, AuditAction.AUTH_FORBIDDEN, AuditAction.AUTH_HIDDEN})


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a request, and from where: what every entry of that request records. ``kind`` is
    a :class:`~cronwheel.auth.identity.CallerKind` value, or ``anonymous`` for a request without a
    valid credential (``id`` and ``name`` None)."""

    kind: str
    id: str | None
    name: str | None
    client: str | None = None  # the client's address (X-Forwarded-For only from a named proxy)
    teams: frozenset[str] | None = None  # the caller's teams (None: every team, or unknown)

    @classmethod
    def of(cls, caller: Caller, client: str | None) -> Actor:
        return cls(caller.kind.value, caller.id, caller.name, client, caller.teams)

    @classmethod
    def anonymous(cls, client: str | None) -> Actor:
        return cls("anonymous", None, None, client)

    def entry(
        self,
        action: AuditAction,
        at: datetime,
        team: str | None,
        target: tuple[str, str | None, str | None] | None = None,
        **changes: Any,
    ) -> AuditEntry:
        """An entry of this actor; ``target`` is (kind, id, name)."""
        kind, target_id, target_name = target if target is not None else (None, None, None)
        return AuditEntry(
            id=new_id(),
            at=at,
            team=team,
            action=action,
            actor_kind=self.kind,
            actor_id=self.id,
            actor_name=self.name,
            client=self.client,
            target_kind=kind,
            target_id=target_id,
            target_name=target_name,
            **changes,
        )


SERVER = Actor("server", None, "the server itself")
"""The actor of a change no caller made: the operator on the server (its first token), or the
server itself (a one-time job deleted by its run's success)."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One line of the audit log. ``team`` is the team whose object it concerns; None for what is
    not one team's (a token of every team, re-encryption, a request without a caller, a request
    stopped at another team's wall): only an admin of every team reads those."""

    id: str
    at: datetime
    team: str | None
    action: AuditAction
    actor_kind: str
    actor_id: str | None
    actor_name: str | None
    client: str | None = None
    target_kind: str | None = None  # job, token, secret, request (a refused one: "METHOD /path")
    target_id: str | None = None
    target_name: str | None = None
    outcome: str = "ok"  # ok, or the refusal: unauthenticated, forbidden, hidden
    status: int | None = None  # the HTTP status of a refusal
    detail: str | None = None  # why it was refused; how many alike were coalesced into it
    before: dict[str, Any] | None = field(default=None, repr=False)
    after: dict[str, Any] | None = field(default=None, repr=False)

    def changed(self, before: dict[str, Any] | None, after: dict[str, Any] | None) -> AuditEntry:
        return dataclasses.replace(self, before=before, after=after)


@dataclass(frozen=True, slots=True)
class AuditQuery:
    team: str | None = None
    teams: tuple[str, ...] | None = None  # the caller's walls (None: every entry, team-less ones too)
    action: str | None = None  # an action, or its family ("job" matches job.*)
    actor: str | None = None  # an actor's id (token id or OIDC subject)
    target: str | None = None  # a target's id or name
    since: datetime | None = None  # at or after
    until: datetime | None = None  # before
    limit: int = 100
    cursor: str | None = None  # newest first
