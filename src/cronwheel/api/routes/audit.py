"""``GET /v1/audit``: the audit log (:mod:`cronwheel.audit`), newest first, a page at a time.

It takes the ``admin`` scope: entries name tokens (their ids and names, which only admins can
list) and every refused request. An admin of every team reads every entry, those of no one team
included (requests without a valid token, requests stopped at a team's wall, tokens of every
team, re-encryption); an admin of some teams reads only those teams' entries, so that a filter on
another team answers an empty page, as a listing of that team's jobs does. There is no route that
changes or deletes an entry.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.routes.common import Cursor, Limit
from cronwheel.api.schemas.base import Instant
from cronwheel.api.schemas.queries import DEFAULT_LIMIT
from cronwheel.api.services import ApiServices, get_services
from cronwheel.audit import AuditEntry, AuditQuery
from cronwheel.auth.identity import Scope
from cronwheel.errors import InvalidInputError

router = APIRouter(tags=["audit"])
Services = Annotated[ApiServices, Depends(get_services)]

ACTION_PATTERN = r"^[a-z]{1,20}(\.[a-z_]{1,20})?$"  # job.backfill_cancel


class AuditEntryOut(BaseModel):
    id: str
    at: datetime = Field(description="When, by the server's clock.")
    team: str | None = Field(description="The team whose object it concerns; null: no one team's.")
    action: str = Field(
        description="job.create, job.update, ..., token.revoke, secret.set, auth.forbidden ..."
    )
    actor_kind: str = Field(
        description="token, oidc, trusted, server (a change no caller made: a one-time job deleted by "
        "its run's success), or anonymous (a request without a valid token)."
    )
    actor_id: str | None = Field(description="The token id, or the OIDC subject.")
    actor_name: str | None
    client: str | None = Field(description="The client's address.")
    target_kind: str | None = Field(description="job, token, secret, secrets, or request (a refusal).")
    target_id: str | None
    target_name: str | None
    outcome: str = Field(description="ok, or the refusal: unauthenticated, forbidden, hidden.")
    status: int | None = Field(description="The HTTP status of a refusal.")
    detail: str | None
    before: dict[str, Any] | None = Field(
        description="The object before (secrets and plain values redacted)."
    )
    after: dict[str, Any] | None = Field(description="The object after (secrets and plain values redacted).")

    @classmethod
    def from_record(cls, entry: AuditEntry) -> AuditEntryOut:
        return cls(
            id=entry.id,
            at=entry.at,
            team=entry.team,
            action=entry.action.value,
            actor_kind=entry.actor_kind,
            actor_id=entry.actor_id,
            actor_name=entry.actor_name,
            client=entry.client,
            target_kind=entry.target_kind,
            target_id=entry.target_id,
            target_name=entry.target_name,
            outcome=entry.outcome,
            status=entry.status,
            detail=entry.detail,
            before=entry.before,
            after=entry.after,
        )


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No token, or one that is invalid, expired or revoked", **PROBLEM_DOC},
    403: {"description": "Not an admin token", **PROBLEM_DOC},
    422: {"description": "Invalid filter or cursor", **PROBLEM_DOC},
}


@router.get("/audit", response_model=AuditPage, responses=_RESPONSES)
async def list_audit(
    services: Services,
    caller: CallerDep,
    team: Annotated[str | None, Query(max_length=100)] = None,
    action: Annotated[
        str | None,
        Query(pattern=ACTION_PATTERN, description='An action ("job.update") or a family of them ("job").'),
    ] = None,
    actor: Annotated[str | None, Query(max_length=200, description="A token id or an OIDC subject.")] = None,
    target: Annotated[str | None, Query(max_length=300, description="A target's id or name.")] = None,
    since: Annotated[Instant | None, Query(description="Entries at or after this instant.")] = None,
    until: Annotated[Instant | None, Query(description="Entries before this instant.")] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> AuditPage:
    """The audit entries this admin may read, newest first (follow ``next_cursor``)."""
    caller.require(Scope.ADMIN)
    teams = None if caller.teams is None else tuple(sorted(caller.teams))
    query = AuditQuery(team, teams, action, actor, target, since, until, limit, cursor)
    try:
        page = await services.store.list_audit(query)
    except InvalidInputError as error:
        raise ProblemError(
            422, "validation", "Invalid request", str(error),
            errors=[field_error("cursor", "not a cursor this API returned", "query", code="invalid_cursor")],
        ) from None  # fmt: skip
    return AuditPage(items=[AuditEntryOut.from_record(e) for e in page.items], next_cursor=page.next_cursor)
