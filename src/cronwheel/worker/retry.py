"""When to try a failed run again: exponential backoff with full jitter (pure).

The curve is :func:`cronwheel.retrying.exponential`, the one every retry of cronwheel follows; the
jitter and the ``Retry-After`` floor are the run's own (a job's policy says whether to jitter, and
jitters fully: a run's retries need spreading more than they need a lower bound)."""

from __future__ import annotations

from cronwheel.model import Outcome, RetryPolicy
from cronwheel.retrying import exponential

MAX_RETRY_AFTER_S = 3600.0  # a target's Retry-After is honoured up to an hour


def should_retry(policy: RetryPolicy, attempt: int, outcome: Outcome, final: bool = False) -> bool:
    """Whether attempt ``attempt`` (1-based) that ended with ``outcome`` gets another try; never
    when the attempt was ``final`` (the target said no retry can succeed)."""
    if final or outcome in (Outcome.SUCCESS, Outcome.CANCELLED):
        return False
    return attempt < policy.max_attempts


def retry_delay(policy: RetryPolicy, attempt: int, rand: float, retry_after_s: float | None = None) -> float:
    """Seconds to wait after attempt ``attempt`` failed.

    The ceiling grows as ``initial_delay_s * multiplier ** (attempt - 1)``, capped at
    ``max_delay_s``; with ``jitter`` the delay is ``rand * ceiling`` ("full jitter", ``rand``
    uniform in [0, 1)). A target's ``Retry-After`` is a floor, itself capped at an hour.
    """
    ceiling = exponential(policy.initial_delay_s, policy.multiplier, policy.max_delay_s, attempt)
    delay = ceiling * rand if policy.jitter else ceiling
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, MAX_RETRY_AFTER_S))
    return delay
