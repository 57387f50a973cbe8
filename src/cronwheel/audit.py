"""The audit log's records: who did what to which object of which team, when, from where, and how
it ended (issue #11, item 8).

An :class:`AuditEntry` is appended for every change made through the API (a job created, edited,
paused, resumed, triggered or deleted; a token made or revoked; a secret set or deleted; secrets
re-encrypted) and for every refused request (401, 403, and a 404 answered because the object is
behind another team's wall). Entries are never updated or deleted through the API.

What a change looked like is kept as ``before``/``after`` snapshots (:func:`job_snapshot`,
:func:`token_snapshot`, :func:`secret_snapshot`), never holding a credential: a job's plain header
and environment values become :data:`REDACTED` (a reference to a secret stays: it is a name, not
a value), its URL loses its user info and query values, a token is its public fields (never the
token or its digest) and a secret is its name and key id (never its value).

The records here are pure (no store, no clock); the store writes them, in the transaction of the
change they record where there is one (:mod:`cronwheel.store.sql.audit`).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronwheel.identity import Caller
from cronwheel.model import Job, new_id
from cronwheel.store.codec import job_definition_to_row, target_to_json
from cronwheel.targets import redacted_url
from cronwheel.tokens import ApiToken

REDACTED = "(redacted)"
"""What a plain header or environment value of a job becomes in an audit snapshot."""


class AuditAction(enum.StrEnum):
    JOB_CREATE = "job.create"
    JOB_UPDATE = "job.update"
    JOB_DELETE = "job.delete"
    JOB_PAUSE = "job.pause"
    JOB_RESUME = "job.resume"
    JOB_TRIGGER = "job.trigger"
    TOKEN_CREATE = "token.create"  # noqa: S105 - an action's name, not a secret
    TOKEN_REVOKE = "token.revoke"  # noqa: S105
    SECRET_SET = "secret.set"  # noqa: S105
    SECRET_DELETE = "secret.delete"  # noqa: S105
    SECRETS_REENCRYPT = "secrets.reencrypt"
    NOTIFICATIONS_SET = "notifications.set"  # a team's default or a job's own rules replaced
    NOTIFICATIONS_DELETE = "notifications.delete"  # a job's own rules dropped (or a team's default)
    AUTH_UNAUTHENTICATED = "auth.unauthenticated"  # 401: no caller
    AUTH_FORBIDDEN = "auth.forbidden"  # 403: the caller lacks a scope, or may not set a field
    AUTH_HIDDEN = "auth.hidden"  # 404: the object is another team's (answered as missing)


FAILURES = frozenset({AuditAction.AUTH_UNAUTHENTICATED, AuditAction.AUTH_FORBIDDEN, AuditAction.AUTH_HIDDEN})


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a request, and from where: what every entry of that request records. ``kind`` is
    a :class:`~cronwheel.identity.CallerKind` value, or ``anonymous`` for a request without a
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


# -- snapshots (never a credential) ----------------------------------------------------------------


def job_snapshot(job: Job | None) -> dict[str, Any] | None:
    """What an audit entry keeps of ``job``: its definition and state as JSON, with every plain
    header and environment value redacted and its URL without user info or query values."""
    if job is None:
        return None
    row = job_definition_to_row(job)
    row["target"] = _redacted_target(job)
    return {
        "id": job.id,
        "version": job.version,
        **{key: _json(value) for key, value in row.items() if key != "updated_at"},
    }


def _redacted_target(job: Job) -> dict[str, Any]:
    target = target_to_json(job.target)
    for key in ("headers", "env"):
        pairs = target.get(key)
        if isinstance(pairs, list):
            target[key] = [[name, value if _is_reference(value) else REDACTED] for name, value in pairs]
    if isinstance(target.get("url"), str):
        target["url"] = redacted_url(target["url"])
    return target


def _is_reference(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secret"}


def _json(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def token_snapshot(token: ApiToken) -> dict[str, Any]:
    """A token's public fields (never the token, nor its digest)."""
    return {
        "id": token.id,
        "name": token.name,
        "team": token.team,
        "scopes": sorted(scope.value for scope in token.scopes),
        "expires_at": _json(token.expires_at),
        "revoked_at": _json(token.revoked_at),
    }


def secret_snapshot(key_id: str, updated_at: datetime | None) -> dict[str, Any]:
    """What is known of a secret's value: the key that seals it, and when it was set."""
    return {"key_id": key_id, "updated_at": _json(updated_at)}
