"""What the API records in the audit log (:mod:`cronwheel.audit`) besides the changes themselves.

* :data:`ActorDep`: the request's :class:`~cronwheel.audit.Actor` (its caller and client
  address), which the routes hand to the services that write: each change's entry is appended in
  the store transaction of the change.
* :func:`refused`: called by the problem handlers of 401, 403 and of a 404 at another team's wall
  (:class:`~cronwheel.errors.HiddenError`), it appends an entry of the refusal in a transaction
  of its own, never failing the answer.

A flood of refusals must not become a flood of writes. The failed-authentication bucket of each
client address (:mod:`cronwheel.api.limits`) already answers 429, before authentication and
unrecorded, once an address has spent its burst; on top of it :class:`RefusalSampler` records at
most one entry per (refusal, address, caller, request) per :data:`WINDOW` (the next one says how
many alike it stands for) and at most :data:`BUDGET` refusal entries per window in each api
process, whatever the number of addresses. What is not written is counted
(``cronwheel_audit_refusals_coalesced_total``).

The client address is the ASGI ``client`` the HTTP server reports: uvicorn takes it from
``X-Forwarded-For`` only when the peer is a trusted proxy (its ``FORWARDED_ALLOW_IPS`` environment
variable, by default 127.0.0.1 and ::1), so a remote caller cannot write another address into the
log.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Annotated

from fastapi import Depends, Request
from prometheus_client import Counter

from cronwheel import metrics
from cronwheel.api.auth import CallerDep
from cronwheel.api.services import ApiServices
from cronwheel.audit import Actor, AuditAction
from cronwheel.clock import Monotonic, monotonic_of
from cronwheel.identity import Caller

log = logging.getLogger("cronwheel.api")

WINDOW = 60.0  # seconds: one entry per kind of refusal per window
BUDGET = 120  # refusal entries per window per api process, in all
MAX_KEYS = 10_000  # kinds of refusal remembered (the least recently recorded forgotten first)

COALESCED = Counter(
    "cronwheel_audit_refusals_coalesced_total",
    "Refused requests (401, 403, 404 at a team's wall) not written to the audit log one by one.",
    registry=metrics.REGISTRY,
)


def client_address(request: Request) -> str | None:
    client = request.scope.get("client")
    return str(client[0])[:100] if client else None


async def current_actor(request: Request, caller: CallerDep) -> Actor:
    """The request's actor (a FastAPI dependency)."""
    return Actor.of(caller, client_address(request))


ActorDep = Annotated[Actor, Depends(current_actor)]


class RefusalSampler:
    """Which refusals are written (see the module docstring), on monotonic time."""

    def __init__(
        self, clock: Monotonic, window: float = WINDOW, budget: int = BUDGET, max_keys: int = MAX_KEYS
    ) -> None:
        self.clock = clock
        self.window = window
        self.budget = budget
        self.max_keys = max_keys
        self._last: OrderedDict[tuple[str, ...], list[float]] = OrderedDict()  # key -> [at, alike since]
        self._window_start = clock.monotonic()
        self._used = 0

    def admit(self, key: tuple[str, ...]) -> int | None:
        """None: do not write this one (it is counted); else write it, standing for the returned
        number of refusals alike that were not written since the last one of ``key``."""
        now = self.clock.monotonic()
        if now - self._window_start >= self.window:
            self._window_start, self._used = now, 0
        last = self._last.get(key)
        if (last is not None and now - last[0] < self.window) or self._used >= self.budget:
            if last is not None:
                last[1] += 1
            COALESCED.inc()
            return None
        alike = 0 if last is None else int(last[1])
        self._last.pop(key, None)
        self._last[key] = [now, 0]
        self._used += 1
        while len(self._last) > self.max_keys:
            self._last.popitem(last=False)
        return alike


def _sampler(request: Request, services: ApiServices) -> RefusalSampler:
    sampler = getattr(request.app.state, "audit_refusals", None)
    if not isinstance(sampler, RefusalSampler):
        sampler = request.app.state.audit_refusals = RefusalSampler(monotonic_of(services.clock))
    return sampler


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
    """Append the audit entry of a refused request (401, 403, 404 at a wall), if sampled in. A
    store that fails is logged, and the refusal answered all the same."""
    services = request.app.state.services
    if not isinstance(services, ApiServices):
        return
    caller = getattr(request.state, "caller", None)
    caller = caller if isinstance(caller, Caller) else None
    address = client_address(request)
    actor = Actor.anonymous(address) if caller is None else Actor.of(caller, address)
    what = f"{request.method} {request.url.path}"[:300]
    key = (str(status), address or "", actor.id or "") + (() if status == 401 else (what,))
    alike = _sampler(request, services).admit(key)
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
        log.warning("audit entry of a refused %s %s not written", request.method, request.url.path)
