"""The one retry policy: how every loop of cronwheel waits after a failure, and which failures it
waits out.

A :class:`Backoff` is data: the first delay, how it grows, its cap, how much jitter, how many tries
(``None``: until it works) and which errors are worth another try. By default only a
:class:`~cronwheel.errors.TransientError` is: each backend translates its driver's errors into
cronwheel's in one place (``store/driver.py``, ``queue/streams.py``, ``coordinator/etcd_client.py``),
so a raw driver error, a bug or a :class:`~cronwheel.errors.PermanentError` (a bad URL, a schema
the process does not know) is raised at once and stops the process, as the supervision rule says,
instead of being retried forever.

Two ways to use it:

* :func:`retry` calls a coroutine function until it succeeds (opening a backend at start);
* a loop that must go on (a scheduler's tick, a worker's receive) keeps a :class:`Retries` from
  :meth:`Backoff.tracker`, asks :meth:`Retries.failed` how long to wait after each transient
  failure (:func:`pause` waits it, woken by the loop's stop) and calls :meth:`Retries.succeeded`
  after each success.

:data:`CONNECT` and :data:`LOOP` are the two policies the process uses.

:func:`exponential` is the pure delay curve, shared with the run retries of jobs
(:func:`cronwheel.worker.retry.retry_delay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from cronwheel.errors import InvalidInputError, TransientError

T = TypeVar("T")

log = logging.getLogger("cronwheel.retrying")


def exponential(first_s: float, multiplier: float, cap_s: float, failures: int) -> float:
    """``first_s * multiplier ** (failures - 1)``, at most ``cap_s`` (``failures`` counts from 1)."""
    exponent = max(failures - 1, 0)
    if multiplier > 1 and exponent > math.log(cap_s / first_s, multiplier):  # past the cap: no overflow
        return cap_s
    return min(cap_s, first_s * multiplier**exponent)


@dataclass(frozen=True, slots=True)
class Backoff:
    """How to wait between tries (see the module docstring).

    The n-th failure waits ``exponential(first_s, multiplier, cap_s, n)`` scaled by a factor drawn
    uniformly from ``[1 - jitter, 1]``: ``jitter=1`` is "full jitter", ``0`` none. Jitter keeps
    nodes that failed together (a backend restart) from retrying in step."""

    first_s: float = 0.5
    multiplier: float = 2.0
    cap_s: float = 30.0
    jitter: float = 0.25
    attempts: int | None = None  # tries in all, the first included; None: until it works
    transient: tuple[type[BaseException], ...] = (TransientError,)

    def __post_init__(self) -> None:
        if not (0 < self.first_s <= self.cap_s and self.multiplier >= 1 and 0 <= self.jitter <= 1):
            raise InvalidInputError(f"impossible backoff {self}")
        if self.attempts is not None and self.attempts < 1:
            raise InvalidInputError(f"a backoff needs at least one attempt, not {self.attempts}")

    def delay(self, failures: int, rand: float) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (``rand`` uniform in [0, 1))."""
        return exponential(self.first_s, self.multiplier, self.cap_s, failures) * (1 - self.jitter * rand)

    def retries(self, error: BaseException) -> bool:
        """Whether ``error`` is worth another try (permanent errors and bugs are not)."""
        return isinstance(error, self.transient)

    def gives_up(self, failures: int) -> bool:
        """Whether ``failures`` failed tries use up :attr:`attempts`."""
        return self.attempts is not None and failures >= self.attempts

    def tracker(self, rand: Callable[[], float] = random.random) -> Retries:
        return Retries(self, rand)


# The policies of cronwheel's loops (tests and tools may pass their own):
#
# CONNECT: opening a backend at start (the store and its migrations, the queue, the coordinator,
# the first read of the store's clock). A backend restarted together with the cluster takes
# seconds to minutes; a process waits for it with 0.5 s, 1 s, 2 s ... up to 30 s between tries
# rather than crash-looping, and never fires without it.
CONNECT = Backoff(first_s=0.5, multiplier=2.0, cap_s=30.0)
# LOOP: a loop that must go on (scheduler tick, sweep, worker receive and claim, clock anchoring,
# job-change listener) after a transient failure. The first try again comes soon, since a lost
# race or a reset connection usually passes at once; then 0.2, 0.4 ... up to 2 s, so an outage is
# not hammered by every node, and a node is back at most about 2 s after its backend.
LOOP = Backoff(first_s=0.1, multiplier=2.0, cap_s=2.0)


class Retries:
    """The failures in a row of one loop under a :class:`Backoff`."""

    def __init__(self, policy: Backoff, rand: Callable[[], float] = random.random) -> None:
        self.policy = policy
        self.failures = 0
        self._rand = rand

    def failed(self) -> float:
        """Count one more failure; the seconds to wait before the next try."""
        self.failures += 1
        return self.policy.delay(self.failures, self._rand())

    def succeeded(self) -> None:
        self.failures = 0


async def pause(seconds: float, stop: asyncio.Event) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile: a loop waiting after a failure
    still stops at once."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def retry(
    name: str,
    call: Callable[[], Awaitable[T]],
    policy: Backoff,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """``await call()`` until it succeeds, waiting as ``policy`` says after each error it
    :meth:`~Backoff.retries`; any other error, or the last one when the attempts are used up, is
    raised. Each wait is logged (``action=wait``, ``backend=name``)."""
    tries = policy.tracker(rand)
    while True:
        try:
            return await call()
        except Exception as error:
            if not policy.retries(error) or policy.gives_up(tries.failures + 1):
                raise
            delay = tries.failed()
            log.warning(
                "backend unavailable, retrying",
                extra={
                    "action": "wait",
                    "backend": name,
                    "attempt": tries.failures,
                    "retry_in_s": round(delay, 3),
                    "error": str(error),
                },
            )
        await sleep(delay)
