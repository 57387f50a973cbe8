"""What the coordinators' lease shells share, whatever holds the leases (etcd keys or PostgreSQL
rows): the error that stops them, their retry policy and how they wait for an event."""

from __future__ import annotations

import asyncio
import contextlib

from cronwheel.errors import PermanentError
from cronwheel.retrying import Backoff


class CoordinatorFailedError(PermanentError):
    """The coordinator stopped on an error that retrying cannot fix (see
    :mod:`cronwheel.coordinator.etcd`)."""


def retry_policy(cap_s: float) -> Backoff:
    """0.1 s, 0.2 s, 0.4 s ... up to ``cap_s``, jittered so that nodes do not retry in step."""
    return Backoff(first_s=0.1, multiplier=2.0, cap_s=cap_s, jitter=0.25)


def always() -> bool:
    return True


async def wait_for(event: asyncio.Event, timeout_s: float) -> None:
    """Until ``event`` is set or ``timeout_s`` passed. (Not ``asyncio.wait_for``: on Python 3.11
    it can swallow a cancellation that arrives as the event fires, and ``stop()`` would hang.)"""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
