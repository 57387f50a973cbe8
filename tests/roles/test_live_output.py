"""A running attempt's output so far, written by its worker to the store (``Worker.write_outputs``):
at most once per ``output_every_s`` by the worker's clock, only when it changed, redacted and
bounded, and replaced by the attempt's final record. Time is the ManualClock's."""

from __future__ import annotations

import asyncio

from cronwheel.clock import ManualClock
from cronwheel.model import Job, PythonTarget, Run, RunState

from . import targets
from .harness import Roles, wait_until

SPEAK = f"{targets.__name__}:speak"


async def _running(roles: Roles) -> tuple[str, asyncio.Task[object]]:
    """A manual run of a ``speak`` job, its attempt running in the worker (a task)."""
    job = Job(id="", team="ops", name="speaker", schedule="0 3 * * *", target=PythonTarget(SPEAK))
    created = await roles.service.create(job)
    run, _ = await roles.service.trigger(created.id)
    [delivery] = await roles.receive()
    task: asyncio.Task[object] = asyncio.create_task(roles.worker.handle(delivery))
    await wait_until(lambda: bool(targets.calls))
    return run.id, task


async def _output(roles: Roles, run_id: str) -> str | None:
    return (await roles.store.list_attempts(run_id))[0].output


async def test_output_so_far_is_written_at_most_once_a_second_and_only_when_changed(
    roles: Roles, clock: ManualClock
) -> None:
    run_id, task = await _running(roles)
    assert await roles.worker.write_outputs() == 0  # nothing written yet: nothing to write
    targets.said.append("first\n")
    assert await roles.worker.write_outputs() == 1
    assert await _output(roles, run_id) == "first\n"
    targets.said.append("second\n")
    clock.advance(0.5)
    assert await roles.worker.write_outputs() == 0  # changed, but written half a second ago
    assert await _output(roles, run_id) == "first\n"
    clock.advance(0.5)
    assert await roles.worker.write_outputs() == 1
    assert await _output(roles, run_id) == "first\nsecond\n"
    clock.advance(5)
    assert await roles.worker.write_outputs() == 0  # a second on, but unchanged
    targets.said.append("end\n")
    run = await asyncio.wait_for(task, 5)
    assert isinstance(run, Run)
    assert run.state is RunState.SUCCESS
    [attempt] = await roles.store.list_attempts(run_id)
    assert attempt.output_at is None  # the final record replaced the output so far
    assert attempt.output == "first\nsecond\nend\n"
    assert await roles.worker.write_outputs() == 0  # the attempt is over: nothing held


async def test_the_output_so_far_keeps_its_last_64_kib(roles: Roles) -> None:
    run_id, task = await _running(roles)
    targets.said.append("x" * 70_000 + "last\n")
    assert await roles.worker.write_outputs() == 1
    output = await _output(roles, run_id)
    assert output is not None
    assert len(output) == 65_536
    assert output.endswith("xlast\n")
    targets.said.append("end\n")
    await asyncio.wait_for(task, 5)
