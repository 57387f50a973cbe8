"""The one retry policy (cronwheel.retrying): delays, jitter, which errors are retried."""

from __future__ import annotations

import pytest

from cronwheel.errors import BackendUnavailableError, InvalidInputError, PermanentError
from cronwheel.retrying import Backoff, exponential, retry


def test_exponential_grows_then_caps() -> None:
    assert [exponential(0.5, 2.0, 4.0, n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert exponential(0.5, 2.0, 30.0, 10_000) == 30.0  # no overflow for a long outage


def test_jitter_scales_down_within_its_fraction() -> None:
    policy = Backoff(first_s=1.0, multiplier=2.0, cap_s=8.0, jitter=0.25)
    assert policy.delay(2, 0.0) == 2.0
    assert policy.delay(2, 0.999) == pytest.approx(1.5, abs=0.01)
    assert Backoff(first_s=1.0, jitter=1.0).delay(1, 0.5) == 0.5  # full jitter


def test_impossible_policies_are_refused() -> None:
    for bad in (
        {"first_s": 0},
        {"first_s": 5, "cap_s": 1},
        {"multiplier": 0.5},
        {"jitter": 2},
        {"attempts": 0},
    ):
        with pytest.raises(InvalidInputError):
            Backoff(**bad)


async def test_retry_waits_out_transient_errors_only() -> None:
    waits: list[float] = []
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 4:
            raise BackendUnavailableError("down")
        return "up"

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = Backoff(first_s=0.1, multiplier=2.0, cap_s=0.3, jitter=0.0)
    assert await retry("db", flaky, policy, sleep=sleep) == "up"
    assert waits == [0.1, 0.2, 0.3]


@pytest.mark.parametrize(
    "error", [PermanentError("bad url"), RuntimeError("a bug"), OSError("raw driver error")]
)
async def test_retry_raises_anything_else_at_once(error: Exception) -> None:
    async def broken() -> None:
        raise error

    async def sleep(seconds: float) -> None:
        raise AssertionError("must not wait")

    with pytest.raises(type(error)):
        await retry("db", broken, Backoff(), sleep=sleep)


async def test_retry_gives_up_after_its_attempts() -> None:
    calls = 0

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise BackendUnavailableError("down")

    async def sleep(seconds: float) -> None:
        pass

    with pytest.raises(BackendUnavailableError):
        await retry("db", down, Backoff(attempts=3), sleep=sleep)
    assert calls == 3


def test_tracker_counts_failures_in_a_row() -> None:
    tries = Backoff(first_s=1.0, multiplier=3.0, cap_s=100.0, jitter=0.0).tracker()
    assert [tries.failed(), tries.failed(), tries.failed()] == [1.0, 3.0, 9.0]
    tries.succeeded()
    assert tries.failed() == 1.0
