"""What an audit entry keeps of a changed object: ``before``/``after`` snapshots as JSON that never
hold a credential.

A job's plain header and environment values become :data:`REDACTED` (a reference to a secret
stays: it is a name, not a value) and its URL loses its user info and query values; a token is its
public fields (never the token or its digest); a secret is its key id and when it was set (never
its value).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronwheel.auth.tokens import ApiToken
from cronwheel.model import Job
from cronwheel.store.codec import job_definition_to_row
from cronwheel.targets.checks import redacted_url
from cronwheel.targets.kinds import target_to_json

REDACTED = "(redacted)"
"""What a plain header or environment value of a job becomes in an audit snapshot."""


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
