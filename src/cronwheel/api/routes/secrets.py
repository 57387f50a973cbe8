"""The API's team secrets: ``/v1/teams/{team}/secrets[/{name}]`` and ``/v1/secrets/reencrypt``.

Write-only values (guarantee 9): a value goes in with ``PUT`` and no response ever holds one;
reads give each secret's name, the id of the key that seals it, and when it was created and last
set. Every route asks the caller first (:meth:`~cronwheel.auth.identity.Caller.require`): ``read`` to
list and show, ``write`` to set and delete, and another team's secrets answer 404 as if they did
not exist. Re-encryption covers every team's secrets, so it takes an admin of all teams.

Request bodies are never logged or echoed (:mod:`cronwheel.api.problems`): a refused value is
named by its field only. The decisions are the functions :func:`list_page`, :func:`get`,
:func:`put`, :func:`delete` and :func:`reencrypt`, which the routes here and the gRPC API
(:mod:`cronwheel.grpc_api`) both call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.operations import paged
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.routes.common import Cursor, Limit
from cronwheel.api.schemas.base import NAME_PATTERN
from cronwheel.api.schemas.queries import DEFAULT_LIMIT
from cronwheel.api.services import ApiServices, get_services
from cronwheel.audit import Actor
from cronwheel.auth.identity import Caller, Scope
from cronwheel.errors import ForbiddenError, InvalidInputError
from cronwheel.secrets.service import MAX_VALUE_BYTES, SecretService, SecretsNotConfiguredError
from cronwheel.store.port import StoredSecret

T = TypeVar("T")

router = APIRouter(tags=["secrets"])

Team = Annotated[str, Path(pattern=NAME_PATTERN, description="The team that owns the secrets.")]
Name = Annotated[str, Path(pattern=NAME_PATTERN, description="The secret's name in its team.")]


def secret_service(services: Annotated[ApiServices, Depends(get_services)]) -> SecretService:
    """The secret service of this API (a 503 problem where the process was built without one)."""
    return secrets_of(services)


def secrets_of(services: ApiServices) -> SecretService:
    """The secret service of ``services`` (a 503 problem where the process was built without one)."""
    if services.secrets is None:
        raise ProblemError(503, "secrets-unavailable", "Secrets unavailable", "this server keeps no secrets")
    return services.secrets


Secrets = Annotated[SecretService, Depends(secret_service)]


class SecretIn(BaseModel):
    """The body of ``PUT``: the value, written once, never returned."""

    model_config = ConfigDict(extra="forbid", strict=True)

    value: Annotated[str, StringConstraints(min_length=1, max_length=MAX_VALUE_BYTES)] = Field(
        description=f"The secret's value: text, at most {MAX_VALUE_BYTES} bytes as UTF-8, without NUL. "
        "The team's `webhook-signing` secret must hold one `whsec_` key, or two separated by a space."
    )


class SecretOut(BaseModel):
    """What can be known of a stored secret: never its value."""

    model_config = ConfigDict(extra="forbid")

    team: str
    name: str
    key_id: str = Field(description="The id of the encryption key that seals the value at rest.")
    created_at: datetime | None
    updated_at: datetime | None = Field(description="When the value was last set.")

    @classmethod
    def from_record(cls, secret: StoredSecret) -> SecretOut:
        return cls(
            team=secret.team,
            name=secret.name,
            key_id=secret.key_id,
            created_at=secret.created_at,
            updated_at=secret.updated_at,
        )


class SecretPage(BaseModel):
    items: list[SecretOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class ReencryptFailure(BaseModel):
    team: str
    name: str
    error: str


class ReencryptOut(BaseModel):
    key_id: str = Field(description="The newest key: every rewritten value is now sealed under it.")
    rewritten: int
    changed_meanwhile: int = Field(description="Set again while being rewritten: already current.")
    failed: list[ReencryptFailure] = Field(description="Values this server cannot open (a key missing).")


def _unconfigured(error: SecretsNotConfiguredError) -> ProblemError:
    return ProblemError(503, "secrets-unavailable", "Secrets unavailable", str(error))


async def _checked(write: Awaitable[T]) -> T:
    """A secret write: a value the service refuses is a 422 on ``value``; no keys, a 503."""
    try:
        return await write
    except InvalidInputError as error:
        raise ProblemError(
            422, "validation", "Invalid request", str(error), errors=[field_error("value", str(error))]
        ) from None
    except SecretsNotConfiguredError as error:
        raise _unconfigured(error) from None


_PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No token, or one that is invalid, expired or revoked", **PROBLEM_DOC},
    403: {"description": "The token lacks the scope", **PROBLEM_DOC},
    404: {"description": "No such secret (or a team the caller does not see)", **PROBLEM_DOC},
    422: {"description": "Invalid input; nothing was written", **PROBLEM_DOC},
    503: {"description": "This server holds no secret keys", **PROBLEM_DOC},
}


@router.get("/teams/{team}/secrets", response_model=SecretPage, responses=_PROBLEMS)
async def list_secrets(
    team: Team,
    caller: CallerDep,
    secrets: Secrets,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> SecretPage:
    """The team's secrets by name (names, key ids and times: never a value)."""
    return await list_page(secrets, caller, team, limit, cursor)


@router.get("/teams/{team}/secrets/{name}", response_model=SecretOut, responses=_PROBLEMS)
async def get_secret(team: Team, name: Name, caller: CallerDep, secrets: Secrets) -> SecretOut:
    """One secret's name, key id and times (never its value)."""
    return await get(secrets, caller, team, name)


@router.put(
    "/teams/{team}/secrets/{name}",
    status_code=201,
    response_model=SecretOut,
    responses={
        **_PROBLEMS,
        200: {"description": "The secret existed: its value was replaced"},
        400: {"description": "Malformed JSON", **PROBLEM_DOC},
    },
)
async def set_secret(
    team: Team, name: Name, body: SecretIn, caller: CallerDep, actor: ActorDep, secrets: Secrets
) -> JSONResponse:
    """Create the secret, or replace its value (201 created, 200 replaced). The value is sealed
    at once; jobs of the team can refer to it as ``{"secret": NAME}``."""
    stored, created = await put(secrets, caller, actor, team, name, body)
    return JSONResponse(
        stored.model_dump(mode="json"),
        status_code=201 if created else 200,
        headers={"Location": f"/v1/teams/{team}/secrets/{name}"},
    )


@router.delete("/teams/{team}/secrets/{name}", status_code=204, responses=_PROBLEMS)
async def delete_secret(
    team: Team, name: Name, caller: CallerDep, actor: ActorDep, secrets: Secrets
) -> Response:
    """Delete the secret. Jobs that still refer to it fail their attempts, saying so."""
    await delete(secrets, caller, actor, team, name)
    return Response(status_code=204)


@router.post(
    "/secrets/reencrypt",
    response_model=ReencryptOut,
    responses={
        401: _PROBLEMS[401],
        403: {"description": "Not an admin of every team", **PROBLEM_DOC},
        503: _PROBLEMS[503],
    },
)
async def reencrypt_secrets(caller: CallerDep, actor: ActorDep, secrets: Secrets) -> ReencryptOut:
    """Rewrite every team's secrets sealed under an older key under this server's newest key
    (after a key rotation). Safe to repeat; values it cannot open are listed, not lost."""
    return await reencrypt(secrets, caller, actor)


# -- what every call does (REST above, gRPC in cronwheel.grpc_api) -------------------------------


async def list_page(
    secrets: SecretService, caller: Caller, team: str, limit: int, cursor: str | None
) -> SecretPage:
    caller.require(Scope.READ, team, what=f"team {team!r}")
    page = await paged(secrets.list(team, limit, cursor))
    return SecretPage(
        items=[SecretOut.from_record(item) for item in page.items], next_cursor=page.next_cursor
    )


async def get(secrets: SecretService, caller: Caller, team: str, name: str) -> SecretOut:
    caller.require(Scope.READ, team, what="secret")
    return SecretOut.from_record(await secrets.get(team, name))


async def put(
    secrets: SecretService, caller: Caller, actor: Actor, team: str, name: str, body: SecretIn
) -> tuple[SecretOut, bool]:
    """Create or replace the secret: what is stored, and whether it was created."""
    caller.require(Scope.WRITE, team, what="secret")
    stored, created = await _checked(secrets.set(team, name, body.value, actor))
    return SecretOut.from_record(stored), created


async def delete(secrets: SecretService, caller: Caller, actor: Actor, team: str, name: str) -> None:
    caller.require(Scope.WRITE, team, what="secret")
    await secrets.delete(team, name, actor)


async def reencrypt(secrets: SecretService, caller: Caller, actor: Actor) -> ReencryptOut:
    caller.require(Scope.ADMIN)
    if caller.teams is not None:
        raise ForbiddenError("re-encryption rewrites every team's secrets: it takes an admin of all teams")
    try:
        done = await secrets.reencrypt(actor=actor)
    except SecretsNotConfiguredError as error:
        raise _unconfigured(error) from None
    return ReencryptOut(
        key_id=done.key_id,
        rewritten=done.rewritten,
        changed_meanwhile=done.changed_meanwhile,
        failed=[ReencryptFailure(team=team, name=name, error=why) for team, name, why in done.failed],
    )
