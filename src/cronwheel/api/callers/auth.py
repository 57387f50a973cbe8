"""Who is calling: the FastAPI dependency every route takes to learn its :class:`Caller`.

A request names its caller with ``Authorization: Bearer <credential>``. The credential is handed
to each :class:`~cronwheel.api.callers.access.Authenticator` in turn: first the store's API tokens
(:class:`TokenAuthenticator`), then whatever else the app was given
(``ApiServices.authenticators``: OIDC). No credential, or one that no authenticator accepts, is a
401 (:class:`~cronwheel.errors.UnauthenticatedError`); what the caller may then do is the routes'
business (:meth:`~cronwheel.auth.identity.Caller.require`). Failures are counted by client address and
token id, and may be refused (429) before the credential is checked
(:mod:`cronwheel.api.callers.failures`): :func:`authenticate` is the one door, for REST and gRPC.

There is no way to turn authentication off: the embedded server makes an admin token on first start
(:mod:`cronwheel.node.server`), and the tests authenticate like any client.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cronwheel.api.services import ApiServices, get_services
from cronwheel.auth import tokens
from cronwheel.auth.identity import Caller, Scope
from cronwheel.clock import Clock
from cronwheel.errors import ForbiddenError, NotFoundError, UnauthenticatedError
from cronwheel.store.port import TokenStore

_bearer = HTTPBearer(
    auto_error=False,
    bearerFormat="cw_<id>_<secret>",
    description=(
        "An API token (`cronwheel tokens create`). On a server configured for OIDC (`--oidc-issuer`), "
        "also a JWT of the organisation's identity provider (RS*, PS*, ES* or EdDSA; never `none` or "
        "HMAC), whose signature, `iss`, `aud`, `exp`, `nbf` and `iat` are checked and whose claims name "
        "the caller's teams and role (docs/service.md, OIDC)."
    ),
)


class TokenRefusedError(UnauthenticatedError):
    """A token whose id exists, refused (a wrong secret, or expired, or revoked): its id's
    failures are counted."""

    def __init__(self, message: str, token_id: str) -> None:
        super().__init__(message)
        self.token_id = token_id


class TokenAuthenticator:
    """The store's API tokens (:mod:`cronwheel.auth.tokens`): one primary-key read per request, so that
    a revocation holds at once in every api process; ``last_used_at`` is written at most once a
    minute per token."""

    def __init__(self, store: TokenStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def authenticate(self, credential: str) -> Caller | None:
        token_id = tokens.token_id(credential)
        if token_id is None:
            if credential.startswith(tokens.PREFIX):
                raise UnauthenticatedError("invalid token")
            return None
        try:
            stored = await self.store.get_token(token_id)
        except NotFoundError:
            stored = None
        now = self.clock.now()
        try:
            caller = tokens.check(stored, credential, now)
        except UnauthenticatedError as error:
            if stored is None:
                raise
            raise TokenRefusedError(str(error), stored.id) from None
        assert stored is not None
        if stored.needs_touch(now):
            await self.store.touch_token(stored.id, now, now - tokens.TOUCH_EVERY)
        return caller


async def authenticate(services: ApiServices, credential: str | None, address: str | None) -> Caller:
    """The caller ``credential`` (a bearer token) from client ``address`` authenticates as: 401
    for none or an invalid one, 429 when its failures are refused before it is checked."""
    token_id = tokens.token_id(credential or "")
    services.failures.admit(address, token_id, services.limits)
    try:
        caller = await _check(services, credential)
    except UnauthenticatedError as error:
        known = error.token_id if isinstance(error, TokenRefusedError) else None
        services.failures.failed(address, known, services.limits)
        raise
    services.failures.succeeded(address, token_id)
    return caller


async def _check(services: ApiServices, credential: str | None) -> Caller:
    if not credential:
        raise UnauthenticatedError("this endpoint needs a token: send 'Authorization: Bearer <token>'")
    authenticators = (TokenAuthenticator(services.store, services.clock), *services.authenticators)
    for authenticator in authenticators:
        caller = await authenticator.authenticate(credential)
        if caller is not None:
            return caller
    raise UnauthenticatedError("invalid token")


async def current_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The caller of ``request`` (a FastAPI dependency: cached for the request)."""
    credential = None if credentials is None else credentials.credentials
    caller = await authenticate(get_services(request), credential, client_address(request))
    request.state.caller = caller
    return caller


CallerDep = Annotated[Caller, Depends(current_caller)]


def client_address(request: Request) -> str | None:
    """The client address the HTTP server reports (see :func:`cronwheel.node.server.http_config`)."""
    client = request.scope.get("client")
    return str(client[0])[:100] if client else None


def require_every_team(caller: Caller, scope: Scope, what: str) -> None:
    """Refuse (403) unless ``caller`` sees every team and has ``scope``: for what is not one
    team's (cluster status, metrics, tokens of every team)."""
    if caller.teams is not None or not caller.has(scope):
        raise ForbiddenError(f"{what} needs a token of every team with the {scope.value!r} scope")
