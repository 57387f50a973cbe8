"""Jobs stored before the service refused their targets (written straight to the store here) still
end in a recorded attempt: outcome ``error`` with the refusal's words, no traceback in the log, no
"internal executor error". Before, a NUL byte in an argument made every attempt raise
``ValueError: embedded null byte`` inside the worker."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime

import pytest

from cronwheel.clock import ManualClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.model import (
    CommandTarget,
    GrpcTarget,
    HttpTarget,
    Job,
    Outcome,
    PythonTarget,
    RunState,
    Target,
    new_id,
)
from cronwheel.queue.memory import MemoryQueue
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.loop import Worker

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SETTINGS = WorkerSettings(allow_commands=True, python_allow=("myapp.*",), allowed_networks=("127.0.0.0/8",))

STORED: list[tuple[Target, str]] = [
    (CommandTarget(argv=("/bin/echo", "a\0b")), "target.argv[1] contains a NUL byte"),
    (
        CommandTarget(argv=("/bin/echo",), env=(("TOKEN", "s3cr3t\0"),)),
        "target.env['TOKEN'] contains a NUL byte",
    ),
    (
        CommandTarget(argv=("/bin/echo",), env=(("A=B", "x"),)),
        "target.env['A=B']: a variable name cannot contain '='",
    ),
    (CommandTarget(argv=("/bin/echo",), env=(("", "x"),)), "target.env has an empty variable name"),
    (CommandTarget(argv=("/bin/echo",), cwd="/tmp\0x"), "target.cwd contains a NUL byte"),
    (CommandTarget(argv=("/bin/echo", "\ud800")), "target.argv[1] is not valid Unicode text"),
    (
        CommandTarget(argv=("/bin/echo", *["x" * 100_000] * 30)),
        "target.argv and target.env take 3000288 bytes to start the program",
    ),
    (
        HttpTarget(url="http://127.0.0.1:9/", headers=(("X-Token", "s3cr3t\x01"),)),
        "target.headers['X-Token']",
    ),
    (HttpTarget(url="http://a..b/"), "target.url has a host name that cannot be looked up"),
    (HttpTarget(url="http://xn--/"), "target.url is not a valid URL"),
    (  # aiohttp raised ValueError: "internal executor error: ValueError"
        HttpTarget(url="http://u:s3cr3t@127.0.0.1:9/", headers=(("authorization", "Bearer s3cr3t"),)),
        "target.url has user info and target.headers an Authorization header",
    ),
    (HttpTarget(url="http://134744072:9/"), "target.url has the IPv4 address 8.8.8.8 spelled '134744072'"),
    (PythonTarget("no colon\0"), "target.function must be 'package.module:function'"),
    (HttpTarget(url="http://127.0.0.1%09:9/"), "target.url has a host holding U+0009"),
    (  # a header the client writes: the attempt fails, saying which, rather than drop or send it
        HttpTarget(url="http://127.0.0.1:9/", headers=(("host", "169.254.169.254"),)),
        "target.headers.host is set by the client from the URL and the body",
    ),
    (
        HttpTarget(url="http://127.0.0.1:9/", headers=(("Transfer-Encoding", "chunked"),)),
        "target.headers.Transfer-Encoding is a hop-by-hop header",
    ),
    (
        GrpcTarget("127.0.0.1:9", "a.B/C", metadata=(("te", "s3cr3t"),)),
        "target.metadata.te is a hop-by-hop header",
    ),
]


@pytest.fixture
def clock() -> ManualClock:
    """The clock of tests/conftest.py's ``store``."""
    return ManualClock(NOW)


@pytest.mark.parametrize(("target", "error"), STORED, ids=[error for _, error in STORED])
async def test_a_stored_bad_target_is_an_error_attempt(
    store: SqlStore, caplog: pytest.LogCaptureFixture, target: Target, error: str
) -> None:
    clock = ManualClock(NOW)
    queue = MemoryQueue(clock)
    service = JobService(store, queue, ChangeFeed(), clock, TargetPolicy(allow_commands=True))
    job = await store.create_job(  # around the service: as written before it refused such targets
        Job(
            id=new_id(),
            team="ops",
            name="old",
            schedule="0 3 * * *",
            target=target,
            created_at=NOW,
            updated_at=NOW,
        )
    )
    run, _ = await service.trigger(job.id)
    executors = Executors(SETTINGS, clock=clock)
    worker = Worker(store, queue, executors, clock, "worker-1", rng=random.Random(1))
    try:
        with caplog.at_level(logging.DEBUG):
            [delivery] = await queue.receive("default", "test", 10, 0.0)
            recorded = await worker.handle(delivery)
    finally:
        await executors.close()
    assert recorded is not None
    assert recorded.state is RunState.FAILED
    [attempt] = await store.list_attempts(run.id)
    assert attempt.outcome is Outcome.ERROR
    assert attempt.error is not None
    assert attempt.error.startswith(error)
    assert "s3cr3t" not in attempt.error
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
