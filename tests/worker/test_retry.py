"""Retry decisions and backoff (pure)."""

from __future__ import annotations

import pytest

from cronwheel.model import Outcome, RetryPolicy
from cronwheel.worker.retry import MAX_RETRY_AFTER_S, retry_delay, should_retry

POLICY = RetryPolicy(max_attempts=4, initial_delay_s=2, multiplier=3, max_delay_s=30, jitter=False)


@pytest.mark.parametrize(("attempt", "expected"), [(1, 2.0), (2, 6.0), (3, 18.0), (4, 30.0), (10, 30.0)])
def test_exponential_and_capped(attempt: int, expected: float) -> None:
    assert retry_delay(POLICY, attempt, rand=0.5) == expected


def test_full_jitter_scales_the_ceiling() -> None:
    jittered = RetryPolicy(max_attempts=4, initial_delay_s=2, multiplier=3, max_delay_s=30, jitter=True)
    assert retry_delay(jittered, 2, rand=0.0) == 0.0
    assert retry_delay(jittered, 2, rand=0.5) == 3.0
    assert retry_delay(jittered, 2, rand=0.999) == pytest.approx(5.994)


def test_retry_after_is_a_floor_capped_at_an_hour() -> None:
    assert retry_delay(POLICY, 1, rand=0.5, retry_after_s=20) == 20.0
    assert retry_delay(POLICY, 1, rand=0.5, retry_after_s=1) == 2.0
    assert retry_delay(POLICY, 1, rand=0.5, retry_after_s=10**9) == MAX_RETRY_AFTER_S


def test_should_retry() -> None:
    assert should_retry(POLICY, 1, Outcome.FAILURE)
    assert should_retry(POLICY, 3, Outcome.TIMEOUT)
    assert not should_retry(POLICY, 4, Outcome.FAILURE)  # budget spent
    assert not should_retry(POLICY, 1, Outcome.SUCCESS)
    assert not should_retry(POLICY, 1, Outcome.CANCELLED)
    assert not should_retry(RetryPolicy(), 1, Outcome.ERROR)  # default: one attempt


def test_a_final_attempt_is_never_retried() -> None:
    """The target said no retry can succeed (a gRPC INVALID_ARGUMENT ...): attempts left or not."""
    assert should_retry(POLICY, 1, Outcome.FAILURE, final=False)
    assert not should_retry(POLICY, 1, Outcome.FAILURE, final=True)
    assert not should_retry(POLICY, 1, Outcome.ERROR, final=True)
