"""The per-caller rate limit of the API: one :class:`RateLimiter` per API process, shared by REST
and gRPC (``ApiServices.rate_limiter``), so that a caller's requests over either count against
one budget and gRPC is no way around it.

A token bucket per key (:func:`caller_key`: the caller's token id or OIDC subject; the client
address of a caller without an identity of its own; :func:`failures_key` and
:func:`token_failures_key`: the client address, and the token id, of requests that failed
authentication, :mod:`cronwheel.api.callers.failures`). A refused request is a :class:`RateLimitedError` whose
``retry_after_s`` REST answers as 429 with ``Retry-After`` (:mod:`cronwheel.api.guards.limits`) and
gRPC as RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo`` of the same seconds
(:mod:`cronwheel.grpc_api.calls`). Pure: no web framework, time from the injected clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cronwheel.auth.identity import Caller, CallerKind
from cronwheel.clock import Monotonic
from cronwheel.errors import RateLimitedError
from cronwheel.limits import Limits

MAX_BUCKETS = 50_000
"""Callers (or addresses) whose buckets are kept; past it, the full ones are forgotten first (a
full bucket is what a new caller gets anyway), then the least recently used."""


_ROUNDING = 1e-9  # of a token: 0.2 s at 10/s is 2 tokens, though a float difference says 1.9999999998


@dataclass(frozen=True, slots=True)
class Bucket:
    """A caller's token bucket: ``tokens`` left at monotonic time ``at``."""

    tokens: float
    at: float


def take(bucket: Bucket | None, now: float, rate_per_s: float, burst: int) -> tuple[Bucket, float]:
    """One request at ``now`` against ``bucket`` (None: a caller not seen yet, whose bucket is
    full): the bucket after it, and 0 when the request is admitted, else the seconds until it
    would be. The bucket refills at ``rate_per_s`` up to ``burst``; a refused request takes
    nothing, so a caller that keeps knocking is not kept out longer for it."""
    tokens = tokens_at(bucket, now, rate_per_s, burst)
    if tokens >= 1.0 - _ROUNDING:
        return Bucket(max(0.0, tokens - 1.0), now), 0.0
    return Bucket(tokens, now), (1.0 - tokens) / rate_per_s


def tokens_at(bucket: Bucket | None, now: float, rate_per_s: float, burst: int) -> float:
    """The tokens ``bucket`` holds at ``now``: refilled since its last request, up to ``burst``."""
    if bucket is None:
        return float(burst)
    return min(float(burst), bucket.tokens + max(0.0, now - bucket.at) * rate_per_s)


class RateLimiter:
    """The buckets of one API process, by key (:func:`rate_key`), on ``clock``'s monotonic time."""

    def __init__(self, clock: Monotonic, max_buckets: int = MAX_BUCKETS) -> None:
        self.clock = clock
        self.max_buckets = max_buckets
        self._buckets: dict[str, Bucket] = {}

    def admit(self, key: str, limits: Limits, what: str = "requests from this caller") -> None:
        """Count one request of ``key``; :class:`RateLimitedError` when its bucket is empty."""
        wait = self._take(key, limits)
        if wait > 0:
            raise refusal(wait, limits, what)

    def charge(self, key: str, limits: Limits) -> None:
        """Count a request of ``key`` that was answered anyway (a failed authentication)."""
        self._take(key, limits)

    def waiting(self, key: str, limits: Limits) -> float:
        """Seconds until ``key`` may make a request (0: now); counts nothing."""
        if limits.rate_per_s <= 0:
            return 0.0
        tokens = tokens_at(
            self._buckets.get(key), self.clock.monotonic(), limits.rate_per_s, limits.rate_burst
        )
        return 0.0 if tokens >= 1.0 - _ROUNDING else (1.0 - tokens) / limits.rate_per_s

    def _take(self, key: str, limits: Limits) -> float:
        if limits.rate_per_s <= 0:
            return 0.0
        now = self.clock.monotonic()
        bucket, wait = take(self._buckets.pop(key, None), now, limits.rate_per_s, limits.rate_burst)
        self._buckets[key] = bucket  # re-inserted: the dict's order is least recently used first
        if len(self._buckets) > self.max_buckets:
            self._forget(now, limits)
        return wait

    def _forget(self, now: float, limits: Limits) -> None:
        for key, bucket in list(self._buckets.items()):
            if tokens_at(bucket, now, limits.rate_per_s, limits.rate_burst) >= limits.rate_burst - _ROUNDING:
                del self._buckets[key]
        while len(self._buckets) > self.max_buckets:
            del self._buckets[next(iter(self._buckets))]


def refusal(wait_s: float, limits: Limits, what: str) -> RateLimitedError:
    return RateLimitedError(max(1, math.ceil(wait_s)), limits.rate_per_s, limits.rate_burst, what)


def caller_key(caller: Caller, address: str | None) -> str:
    """Whose bucket a request of ``caller`` takes from: its caller's, or its client address's
    when it has no identity of its own (the trusted caller of an app without authentication)."""
    if caller.kind is not CallerKind.TRUSTED:
        return f"caller:{caller.kind}:{caller.id}"
    return f"address:{address or 'unknown'}"


def failures_key(address: str | None) -> str:
    """The bucket of the requests from ``address`` that failed authentication."""
    return f"failures:{address or 'unknown'}"


def token_failures_key(token_id: str) -> str:
    """The bucket of the failed authentications that named the existing token ``token_id``."""
    return f"token-failures:{token_id}"
