"""Failed authentications: which credentials are refused before they are checked, and what a
failure costs. Shared by REST and gRPC (``ApiServices.failures``, called by
:func:`cronwheel.api.callers.auth.authenticate`), on the buckets of the services' rate limiter
(:mod:`cronwheel.api.guards.rate`: the callers' rate and burst).

A credential that fails costs a token lookup, and has no caller to count by. Each failure takes
from two buckets:

* its client address's (:func:`~cronwheel.api.guards.rate.failures_key`), whatever the credential;
* its token id's (:func:`~cronwheel.api.guards.rate.token_failures_key`), when the credential is an API
  token whose id exists (``cw_<id>_<secret>`` with a wrong secret, or expired, or revoked),
  wherever it comes from: guessing one token's secret is limited from every address together.

An empty bucket refuses (429) before the credential is checked, but a lockout must not become a
way to lock out a valid token: token ids are not secret (they are listed, logged and audited),
and many clients may share an address (a NAT, a proxy the operator did not name). So the
decision (:func:`refusal`) remembers which tokens authenticated, and from where, within
:data:`REMEMBERED`:

1. a token that authenticated from this address is always checked: an attacker, from this address
   or any other, does not lock its holder out;
2. else an address whose bucket is empty is refused, unless the credential names a token that
   authenticated from anywhere: the tokens in use by other clients behind the same address are
   checked, a flood of made-up credentials is not;
3. else a token id whose bucket is empty is refused: its secret is not tried from any address
   it has not authenticated from.

A failure of a token from an address it authenticated from forgets that pair: an attacker who
shares its holder's address gets one try, not a way around the token's bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

from cronwheel.api.guards.rate import RateLimiter, failures_key, refusal, token_failures_key
from cronwheel.limits import Limits

REMEMBERED = 24 * 3600.0
"""Seconds a successful authentication is remembered (of a token, and of a token from an address)."""

MAX_REMEMBERED = 50_000
"""Tokens and (token, address) pairs remembered; past it, the least recently used are forgotten."""


@dataclass(frozen=True, slots=True)
class Waits:
    """Seconds until each bucket allows a failure (0: now), and what is remembered."""

    address: float
    token: float
    token_known: bool  # the token authenticated, from anywhere, within REMEMBERED
    pair_known: bool  # ... from this address


def refusal_of(waits: Waits) -> tuple[float, str] | None:
    """Whether a credential is refused before it is checked: the seconds to wait and what is
    refused, or None (see the module docstring for the rules)."""
    if waits.pair_known:
        return None
    if waits.address > 0 and not waits.token_known:
        return waits.address, "requests that failed authentication from this address"
    if waits.token > 0:
        return waits.token, "failed authentications with this token"
    return None


class FailedAuthentications:
    """The failures' buckets (on ``limiter``) and the authentications remembered."""

    def __init__(self, limiter: RateLimiter, max_remembered: int = MAX_REMEMBERED) -> None:
        self.limiter = limiter
        self.max_remembered = max_remembered
        self._seen: dict[str, float] = {}  # key -> monotonic time of its last authentication

    def admit(self, address: str | None, token_id: str | None, limits: Limits) -> None:
        """Let a credential be checked (``token_id``: the id it names, if it is an API token), or
        raise :class:`~cronwheel.errors.RateLimitedError`."""
        waits = Waits(
            self.limiter.waiting(failures_key(address), limits),
            0.0 if token_id is None else self.limiter.waiting(token_failures_key(token_id), limits),
            token_id is not None and self._known(_token(token_id)),
            token_id is not None and self._known(_pair(token_id, address)),
        )
        refused = refusal_of(waits)
        if refused is not None:
            raise refusal(refused[0], limits, refused[1])

    def failed(self, address: str | None, token_id: str | None, limits: Limits) -> None:
        """Count a failure from ``address`` (``token_id``: the existing token it named, if any)."""
        self.limiter.charge(failures_key(address), limits)
        if token_id is not None:
            self.limiter.charge(token_failures_key(token_id), limits)
            self._seen.pop(_pair(token_id, address), None)

    def succeeded(self, address: str | None, token_id: str | None) -> None:
        """Remember that ``token_id`` (an API token; None: another credential) authenticated."""
        if token_id is None:
            return
        now = self.limiter.clock.monotonic()
        for key in (_token(token_id), _pair(token_id, address)):
            self._seen.pop(key, None)
            self._seen[key] = now  # re-inserted: the dict's order is least recently used first
        while len(self._seen) > self.max_remembered:
            del self._seen[next(iter(self._seen))]

    def _known(self, key: str) -> bool:
        at = self._seen.get(key)
        return at is not None and self.limiter.clock.monotonic() - at < REMEMBERED


def _token(token_id: str) -> str:
    return f"token:{token_id}"


def _pair(token_id: str, address: str | None) -> str:
    return f"pair:{token_id}@{address or 'unknown'}"
