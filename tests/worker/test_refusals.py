"""Stored jobs a worker will refuse are named at its start."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from cronwheel.model import CommandTarget, HttpTarget, Job, PythonTarget, Target, new_id
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.refusals import refusal, refused_jobs, warn_refused_jobs

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def store_clock() -> None:
    """tests/conftest.py's ``store`` keeps its own clock here (the system's)."""


async def add(store: SqlStore, name: str, target: Target, queue: str = "default") -> Job:
    job = Job(new_id(), "ops", name, "* * * * *", target, queue=queue, next_run_at=T0)
    return await store.create_job(job)


def test_the_option_each_target_needs() -> None:
    none = WorkerSettings()
    assert refusal(CommandTarget(("true",)), none) == "--allow-commands"
    assert refusal(PythonTarget("jobs.daily:run"), none) == "--allow-python 'jobs.daily:run'"
    assert refusal(HttpTarget("https://example.com/hook"), none) is None
    allowed = WorkerSettings(allow_commands=True, python_allow=("jobs.*",))
    assert refusal(CommandTarget(("true",)), allowed) is None
    assert refusal(PythonTarget("jobs.daily:run"), allowed) is None
    assert refusal(PythonTarget("other:run"), allowed) == "--allow-python 'other:run'"


async def test_one_fact_per_refused_job_of_the_queues_served(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    command = await add(store, "cleanup", CommandTarget(("rm", "-rf", "/tmp/x")))
    python = await add(store, "report", PythonTarget("reports:daily"))
    await add(store, "hook", HttpTarget("https://example.com/hook"))
    await add(store, "elsewhere", CommandTarget(("true",)), queue="batch")  # another worker's queue
    deleted = await add(store, "gone", CommandTarget(("true",)))
    await store.delete_job(deleted.id, T0)
    with caplog.at_level(logging.WARNING, logger="cronwheel.worker"):
        count = await warn_refused_jobs(store, WorkerSettings(), ("default",), "worker-1")
    assert count == 2
    facts = [record.__dict__ for record in caplog.records]
    assert [fact["action"] for fact in facts] == ["refused_jobs", "refused_job", "refused_job"]
    assert (facts[0]["count"], facts[0]["listed"]) == (2, 2)
    named = {fact["job_id"]: (fact["allow"], fact["target"], fact["queue"]) for fact in facts[1:]}
    assert named == {
        command.id: ("--allow-commands", "command", "default"),
        python.id: ("--allow-python 'reports:daily'", "python", "default"),
    }
    assert {(record.levelno, record.__dict__["node"]) for record in caplog.records} == {
        (logging.WARNING, "worker-1")
    }


async def test_bounded_a_count_and_the_first_few(store: SqlStore) -> None:
    for index in range(7):
        await add(store, f"job-{index}", CommandTarget(("true",)))
    count, first = await refused_jobs(store, WorkerSettings(), ("default",), listed=3)
    assert (count, len(first)) == (7, 3)


async def test_a_worker_that_allows_everything_says_nothing(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    await add(store, "cleanup", CommandTarget(("true",)))
    await add(store, "report", PythonTarget("reports:daily"))
    allowed = WorkerSettings(allow_commands=True, python_allow=("reports:*",))
    with caplog.at_level(logging.WARNING, logger="cronwheel.worker"):
        assert await warn_refused_jobs(store, allowed, ("default",), "worker-1") == 0
    assert caplog.records == []
