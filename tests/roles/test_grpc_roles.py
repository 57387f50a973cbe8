"""gRPC targets through the scheduler and the worker over the real store, against a live gRPC
server on 127.0.0.1: a final status ends the run FAILED at its first attempt whatever attempts
remain; a retryable one is retried; success keeps the response."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import GrpcTarget, Job, Outcome, RetryPolicy, RunState
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.loop import Worker
from grpc_echo import SAY, EchoServer

from .harness import ALLOW, Roles, at

LOOPBACK = ("127.0.0.0/8",)
RETRY = RetryPolicy(max_attempts=3, initial_delay_s=10, jitter=False)


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    server = await EchoServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def worker(roles: Roles) -> AsyncIterator[Worker]:
    roles.service.policy = TargetPolicy(python_allow=ALLOW, allowed_networks=LOOPBACK)
    executors = Executors(WorkerSettings(allowed_networks=LOOPBACK), clock=roles.clock)
    yield Worker(roles.store, roles.queue, executors, roles.clock, "worker-g", rng=random.Random(1))
    await executors.close()


async def create(roles: Roles, echo: EchoServer, name: str) -> Job:
    job = Job(
        id="",
        team="ops",
        name=name.replace(":", "-"),
        schedule="* * * * *",
        target=GrpcTarget(echo.address, SAY),
        payload={"name": name},
        retry=RETRY,
    )
    created = await roles.service.create(job)
    await roles.notify()
    return created


@pytest.mark.parametrize(
    ("name", "state", "outcome", "error"),
    [
        (
            "status:NOT_FOUND",
            RunState.FAILED,
            Outcome.FAILURE,
            "grpc status NOT_FOUND: told to (status:NOT_FOUND)",
        ),
        (
            "status:INVALID_ARGUMENT",
            RunState.FAILED,
            Outcome.FAILURE,
            "grpc status INVALID_ARGUMENT: told to (status:INVALID_ARGUMENT)",
        ),
        (
            "status:RESOURCE_EXHAUSTED",
            RunState.RETRYING,
            Outcome.FAILURE,
            "grpc status RESOURCE_EXHAUSTED: told to (status:RESOURCE_EXHAUSTED)",
        ),
        (
            "status:UNAVAILABLE",
            RunState.RETRYING,
            Outcome.ERROR,
            "grpc status UNAVAILABLE: told to (status:UNAVAILABLE)",
        ),
        ("ada", RunState.SUCCESS, Outcome.SUCCESS, None),
    ],
)
async def test_the_status_decides_whether_the_run_is_retried(
    roles: Roles,
    worker: Worker,
    echo: EchoServer,
    name: str,
    state: RunState,
    outcome: Outcome,
    error: str | None,
) -> None:
    await create(roles, echo, name)
    await roles.tick(at(1))
    [run] = await roles.work(worker)
    assert run is not None
    assert (run.state, run.attempts) == (state, 1)
    [attempt] = await roles.attempts(run.id)
    assert (attempt.outcome, attempt.error) == (outcome, error)
    if state is RunState.SUCCESS:
        assert attempt.output == '{"greeting": "hello ada"}'
    [call] = echo.calls
    assert call.metadata["idempotency-key"] == run.id
    assert call.metadata["x-cronwheel-attempt"] == "1"


async def test_a_final_status_ends_the_run_although_attempts_remain(
    roles: Roles, worker: Worker, echo: EchoServer
) -> None:
    await create(roles, echo, "status:PERMISSION_DENIED")
    await roles.tick(at(1))
    [run] = await roles.work(worker)
    assert run is not None
    roles.clock.advance(3600)
    assert await roles.receive() == []  # no retry was queued
    assert await roles.history(run.id) == [RunState.PENDING, RunState.RUNNING, RunState.FAILED]
    assert len(echo.calls) == 1
