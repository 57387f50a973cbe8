"""Who is calling: the FastAPI dependency every route takes to learn its :class:`Caller`.

A request names its caller with ``Authorization: Bearer <credential>``. The credential is handed
to each :class:`~cronwheel.api.access.Authenticator` in turn: first the store's API tokens
(:class:`TokenAuthenticator`), then whatever else the app was given
(``ApiServices.authenticators``: OIDC). No credential, or one that no authenticator accepts, is a
401 (:class:`~cronwheel.errors.UnauthenticatedError`); what the caller may then do is the routes'
business (:meth:`~cronwheel.identity.Caller.require`).

There is no way to turn authentication off: the embedded server makes an admin token on first start
(:mod:`cronwheel.server`), and the tests authenticate like any client.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cronwheel import tokens
from cronwheel.api.services import ApiServices, get_services
from cronwheel.clock import Clock
from cronwheel.errors import ForbiddenError, NotFoundError, UnauthenticatedError
from cronwheel.identity import Caller, Scope
from cronwheel.store import Store

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


class TokenAuthenticator:
    """The store's API tokens (:mod:`cronwheel.tokens`): one primary-key read per request, so that
    a revocation holds at once in every api process; ``last_used_at`` is written at most once a
    minute per token."""

    def __init__(self, store: Store, clock: Clock) -> None:
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
        caller = tokens.check(stored, credential, now)
        assert stored is not None
        if stored.needs_touch(now):
            await self.store.touch_token(stored.id, now, now - tokens.TOUCH_EVERY)
        return caller


async def authenticate(services: ApiServices, credential: str | None) -> Caller:
    """The caller ``credential`` (a bearer token) authenticates as; 401 for none or an invalid one."""
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
    caller = await authenticate(get_services(request), credential)
    request.state.caller = caller
    return caller


CallerDep = Annotated[Caller, Depends(current_caller)]


def require_every_team(caller: Caller, scope: Scope, what: str) -> None:
    """Refuse (403) unless ``caller`` sees every team and has ``scope``: for what is not one
    team's (cluster status, metrics, tokens of every team)."""
    if caller.teams is not None or not caller.has(scope):
        raise ForbiddenError(f"{what} needs a token of every team with the {scope.value!r} scope")
