"""What the API records in the audit log (:mod:`cronwheel.audit`) besides the changes themselves.

* :data:`ActorDep`: the request's :class:`~cronwheel.audit.Actor` (its caller and client
  address), which the routes hand to the services that write: each change's entry is appended in
  the store transaction of the change.
* :func:`refused`: called by the problem handlers of 401, 403 and of a 404 at another team's wall
  (:class:`~cronwheel.errors.HiddenError`), it appends an entry of the refusal in a transaction
  of its own, never failing the answer. The gRPC API calls :func:`record_refusal`, which
  :func:`refused` calls, for the same refusals (UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND at
  a wall): the same entries, the request named ``gRPC /cronwheel.v1.<Service>/<Method>``.

A flood of refusals must not become a flood of writes. The failed-authentication buckets of each
client address and token id (:mod:`cronwheel.api.callers.failures`) already answer 429, before
authentication and unrecorded, once they are spent; on top of it :class:`RefusalSampler` records at
most one entry per (refusal, address, caller, request) per :data:`WINDOW` (the next one says how
many alike it stands for) and at most :data:`BUDGET` refusal entries per window in each api
process, whatever the number of addresses, REST and gRPC together (the services' one sampler,
:mod:`cronwheel.api.callers.sampling`). What is not written is counted
(``cronwheel_audit_refusals_coalesced_total``).

The client address is the ASGI ``client`` the HTTP server reports: uvicorn takes it from
``X-Forwarded-For`` only when the peer is a proxy the operator named (``--forwarded-allow-ips``,
none by default: :func:`cronwheel.node.server.http_config`), so a caller cannot write another address
into the log.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request

from cronwheel.api.callers.auth import CallerDep, client_address
from cronwheel.api.callers.sampling import BUDGET, WINDOW, RefusalSampler
from cronwheel.api.services import ApiServices
from cronwheel.audit import Actor, AuditAction
from cronwheel.auth.identity import Caller

log = logging.getLogger("cronwheel.api")

__all__ = ["BUDGET", "WINDOW", "ActorDep", "RefusalSampler", "record_refusal", "refused"]


async def current_actor(request: Request, caller: CallerDep) -> Actor:
    """The request's actor (a FastAPI dependency)."""
    return Actor.of(caller, client_address(request))


ActorDep = Annotated[Actor, Depends(current_actor)]


_ACTIONS = {
    401: AuditAction.AUTH_UNAUTHENTICATED,
    403: AuditAction.AUTH_FORBIDDEN,
    404: AuditAction.AUTH_HIDDEN,
}
_OUTCOMES = {401: "unauthenticated", 403: "forbidden", 404: "hidden"}


def _team(caller: Caller | None, status: int) -> str | None:
    """The team a refusal's entry belongs to: the caller's own, when it has exactly one and was
    refused a scope (403). A 401 has no caller; a 404 at a wall names another team's object,
    which neither the caller's team nor the object's may learn of: those are no one team's."""
    if status != 403 or caller is None or caller.teams is None or len(caller.teams) != 1:
        return None
    return next(iter(caller.teams))


async def refused(request: Request, status: int, detail: str) -> None:
    """Append the audit entry of a refused REST request (401, 403, 404 at a wall), if sampled in."""
    services = request.app.state.services
    if not isinstance(services, ApiServices):
        return
    caller = getattr(request.state, "caller", None)
    caller = caller if isinstance(caller, Caller) else None
    what = f"{request.method} {request.url.path}"
    await record_refusal(services, caller, client_address(request), what, status, detail)


async def record_refusal(
    services: ApiServices, caller: Caller | None, address: str | None, what: str, status: int, detail: str
) -> None:
    """Append the audit entry of a refused request (REST's ``GET /v1/jobs/...``, gRPC's
    ``gRPC /cronwheel.v1.JobService/GetJob``): ``status`` 401 (``caller`` None), 403 or 404 at a
    wall, if the services' sampler lets it in. A store that fails is logged, and the refusal
    answered all the same."""
    actor = Actor.anonymous(address) if caller is None else Actor.of(caller, address)
    what = what[:300]
    key = (str(status), address or "", actor.id or "") + (() if status == 401 else (what,))
    alike = services.refusals.admit(key)
    if alike is None:
        return
    note = f"; and {alike} alike since the last one recorded" if alike else ""
    entry = actor.entry(
        _ACTIONS[status],
        services.clock.now(),
        _team(caller, status),
        ("request", what, None),
        outcome=_OUTCOMES[status],
        status=status,
        detail=(detail + note)[:1000],
    )
    try:
        await services.store.append_audit([entry])
    except Exception:
        log.warning("action=audit_refusal_unwritten status=%d request=%s", status, what)
