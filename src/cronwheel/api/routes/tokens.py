"""``/v1/tokens``: make, list, read and revoke API tokens (:mod:`cronwheel.auth.tokens`).

Every route needs the ``admin`` scope. An admin of every team manages every token; an admin of
one team manages that team's tokens only (it may give them any scope, ``admin`` included, on that
team, and cannot make a token of every team, which would reach beyond its walls). Another team's
token answers 404, as a missing one. A new token is answered once, in ``token``; it cannot be read
again (only its SHA-256 digest is stored). Revoking keeps the token's record (listed with
``include_revoked``) so that the audit trail can still name it.

The decisions are the functions :func:`create`, :func:`list_page`, :func:`get` and :func:`revoke`,
which the routes here and the gRPC API (:mod:`cronwheel.grpc_api`) both call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.operations import paged
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.routes.common import Cursor, Limit
from cronwheel.api.schemas.base import Instant, Name
from cronwheel.api.schemas.queries import DEFAULT_LIMIT, Short
from cronwheel.api.services import ApiServices, get_services
from cronwheel.audit import Actor, AuditAction
from cronwheel.auth import tokens
from cronwheel.auth.identity import Caller, CallerKind, Scope
from cronwheel.auth.tokens import ApiToken, TokenState
from cronwheel.errors import ForbiddenError, HiddenError, InvalidInputError
from cronwheel.store import TokenQuery

router = APIRouter(tags=["tokens"])
Services = Annotated[ApiServices, Depends(get_services)]
TokenName = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f]+$")]


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: TokenName = Field(description="What the token is for (shown in listings and the audit log).")
    team: Name | None = Field(
        default=None, description="The token's team; null: every team (only an admin of every team)."
    )
    scopes: list[Annotated[Scope, Field(strict=False)]] = Field(
        min_length=1, max_length=4, description="read, write, trigger, admin (admin includes the others)."
    )
    expires_at: Instant | None = Field(default=None, description="Refused from then on; null: never.")


class TokenOut(BaseModel):
    id: str = Field(description="The token's public id (its second part, cw_<id>_...).")
    name: str
    team: str | None = Field(description="null: every team.")
    scopes: list[Scope]
    state: TokenState = Field(description="At the time of the answer.")
    created_at: datetime
    created_by: str | None = Field(
        description="The id of the token that made it; null: made on the server, or by an OIDC caller."
    )
    expires_at: datetime | None
    last_used_at: datetime | None = Field(description="Updated at most once a minute.")
    revoked_at: datetime | None

    @classmethod
    def from_record(cls, token: ApiToken, now: datetime) -> TokenOut:
        return cls(
            id=token.id,
            name=token.name,
            team=token.team,
            scopes=sorted(token.scopes),
            state=token.state(now),
            created_at=token.created_at,
            created_by=token.created_by,
            expires_at=token.expires_at,
            last_used_at=token.last_used_at,
            revoked_at=token.revoked_at,
        )


class TokenCreated(TokenOut):
    token: str = Field(description="The token itself: shown this once, never again.")


class TokenPage(BaseModel):
    items: list[TokenOut]
    next_cursor: str | None


# -- what every call does (REST here, gRPC in cronwheel.grpc_api) ------------------------------


async def create(services: ApiServices, caller: Caller, actor: Actor, body: TokenCreate) -> TokenCreated:
    """Make the token ``body`` describes, if ``caller`` may: the answer holds it, once."""
    caller.require(Scope.ADMIN)
    if not _may_manage(caller, body.team):
        whose = "every team" if body.team is None else f"team {body.team!r}"
        raise ForbiddenError(f"this {caller.kind} may not make tokens of {whose}")
    now = services.clock.now()
    try:
        record, text = tokens.issue(
            body.name, body.team, body.scopes, now, expires_at=body.expires_at, created_by=_maker(caller)
        )
    except InvalidInputError as error:
        raise ProblemError(
            422, "validation", "Invalid request", str(error),
            errors=[field_error("expires_at", str(error), code="in_the_past")],
        ) from None  # fmt: skip
    entry = actor.entry(AuditAction.TOKEN_CREATE, now, record.team, ("token", record.id, record.name))
    stored = await services.store.create_token(record, audit=entry)
    return TokenCreated(**TokenOut.from_record(stored, now).model_dump(), token=text)


async def list_page(
    services: ApiServices,
    caller: Caller,
    team: str | None,
    include_revoked: bool,
    limit: int,
    cursor: str | None,
) -> TokenPage:
    caller.require(Scope.ADMIN)
    teams = None if caller.teams is None else tuple(sorted(caller.teams))
    query = TokenQuery(team, teams, include_revoked, limit, cursor)
    page = await paged(services.store.list_tokens(query))
    now = services.clock.now()
    return TokenPage(items=[TokenOut.from_record(t, now) for t in page.items], next_cursor=page.next_cursor)


async def get(services: ApiServices, caller: Caller, token_id: str) -> TokenOut:
    return TokenOut.from_record(await _visible(services, caller, token_id), services.clock.now())


async def revoke(services: ApiServices, caller: Caller, actor: Actor, token_id: str) -> None:
    token = await _visible(services, caller, token_id)
    now = services.clock.now()
    entry = actor.entry(AuditAction.TOKEN_REVOKE, now, token.team, ("token", token.id, token.name))
    await services.store.revoke_token(token_id, now, audit=entry)


# -- routes -----------------------------------------------------------------------------------

_DOC: dict[str, Any] = PROBLEM_DOC
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No token, or one that is invalid, expired or revoked", **_DOC},
    403: {"description": "Not an admin token, or one that may not make this token", **_DOC},
}

_ONE = {**_ERRORS, 404: {"description": "No such token (or one of a team this admin is not of)", **_DOC}}


def _may_manage(caller: Caller, team: str | None) -> bool:
    return caller.teams is None or (team is not None and caller.sees(team))


async def _visible(services: ApiServices, caller: Caller, token_id: str) -> ApiToken:
    caller.require(Scope.ADMIN)
    token = await services.store.get_token(token_id)
    if not _may_manage(caller, token.team):
        raise HiddenError(f"token {token_id} not found")
    return token


def _maker(caller: Caller) -> str | None:
    """What a new token records as its maker: the id of the token that made it. An OIDC subject is
    not a token id (and may be longer than the column holds: 36 on PostgreSQL)."""
    return caller.id if caller.kind is CallerKind.TOKEN else None


@router.post(
    "/tokens",
    status_code=201,
    response_model=TokenCreated,
    responses={
        **_ERRORS,
        400: {"description": "Malformed JSON", **_DOC},
        422: {"description": "Invalid input; nothing was written", **_DOC},
    },
)
async def create_token(
    body: TokenCreate, services: Services, caller: CallerDep, actor: ActorDep
) -> JSONResponse:
    """Make a token; the answer holds it (``token``), once."""
    out = await create(services, caller, actor, body)
    return JSONResponse(
        out.model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/tokens/{out.id}", "Cache-Control": "no-store"},
    )


_BAD_CURSOR: dict[int | str, dict[str, Any]] = {422: {"description": "Bad cursor", **_DOC}}


@router.get("/tokens", response_model=TokenPage, responses={**_ERRORS, **_BAD_CURSOR})
async def list_tokens(
    services: Services,
    caller: CallerDep,
    team: Annotated[Short | None, Query()] = None,
    include_revoked: bool = False,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> TokenPage:
    """The tokens this admin manages, oldest first (revoked ones with ``include_revoked``)."""
    return await list_page(services, caller, team, include_revoked, limit, cursor)


@router.get("/tokens/{token_id}", response_model=TokenOut, responses=_ONE)
async def get_token(token_id: str, services: Services, caller: CallerDep) -> TokenOut:
    """The token; a revoked one stays readable, with ``state`` revoked, for the audit trail."""
    return await get(services, caller, token_id)


@router.delete("/tokens/{token_id}", status_code=204, responses=_ONE)
async def revoke_token(token_id: str, services: Services, caller: CallerDep, actor: ActorDep) -> Response:
    """Revoke the token: every request made with it is refused from now on (401). The token's
    record stays, with ``state`` revoked (GET answers 200), so the audit log can name it."""
    await revoke(services, caller, actor, token_id)
    return Response(status_code=204)
