"""A running attempt's output so far (``LeaseStore.write_outputs``, ``RunReads.output_changes``),
on every backend in conftest.BACKENDS: written only by the lease holder, bounded, read by run,
and replaced by the attempt's final record."""

from __future__ import annotations

from cronwheel.model import AttemptResult, Finish, LiveOutput, Outcome
from cronwheel.store.sql import SqlStore

from .support import LEASE, at, fire_one, new_job


async def test_the_lease_holder_writes_the_output_so_far(store: SqlStore) -> None:
    job = await new_job(store)
    run = await fire_one(store, job)
    await store.claim_run(run.id, "w1", at(0), at(0) + LEASE)
    assert await store.write_outputs([LiveOutput(run.id, 1, "first\n")], "w1", at(1)) == {run.id}
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.output, attempt.output_at, attempt.finished_at) == ("first\n", at(1), None)
    [change] = await store.output_changes([run.id])
    assert (change.run_id, change.job_id, change.team, change.attempt) == (run.id, job.id, job.team, 1)
    assert (change.output, change.at) == ("first\n", at(1))


async def test_a_worker_without_the_lease_writes_nothing(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(0), at(0) + LEASE)
    stale = [LiveOutput(run.id, 1, "stale")]
    assert await store.write_outputs(stale, "w2", at(1)) == set()  # another worker
    assert (
        await store.write_outputs([LiveOutput(run.id, 2, "stale")], "w1", at(1)) == set()
    )  # another attempt
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.output, attempt.output_at) == (None, None)
    assert await store.output_changes([run.id]) == []


async def test_the_output_so_far_is_bounded_to_its_last_64_kib(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(0), at(0) + LEASE)
    text = "a" * 70_000 + "the end"
    await store.write_outputs([LiveOutput(run.id, 1, text)], "w1", at(1))
    [attempt] = await store.list_attempts(run.id)
    assert attempt.output == text[-65_536:]


async def test_the_final_record_replaces_the_output_so_far(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(0), at(0) + LEASE)
    await store.write_outputs([LiveOutput(run.id, 1, "first\n")], "w1", at(1))
    done = AttemptResult(Outcome.SUCCESS, exit_code=0, output="first\nsecond\n")
    assert set(await store.finish_attempts([Finish(run.id, 1, done)], "w1", at(2))) == {run.id}
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.output, attempt.output_at, attempt.finished_at) == ("first\nsecond\n", None, at(2))
    assert await store.output_changes([run.id]) == []
    # a late write of the worker, after its outcome, changes nothing
    assert await store.write_outputs([LiveOutput(run.id, 1, "late")], "w1", at(3)) == set()
    assert (await store.list_attempts(run.id))[0].output == "first\nsecond\n"


async def test_output_changes_reads_only_the_runs_named(store: SqlStore) -> None:
    one, other = [await fire_one(store, await new_job(store, name=name)) for name in ("one", "other")]
    await store.claim_runs([one.id, other.id], "w1", at(0), at(0) + LEASE)
    outputs = [LiveOutput(one.id, 1, "1"), LiveOutput(other.id, 1, "2")]
    assert await store.write_outputs(outputs, "w1", at(1)) == {one.id, other.id}
    assert [c.output for c in await store.output_changes([one.id])] == ["1"]
    assert await store.output_changes([]) == []


async def test_an_attempt_keeps_the_headers_it_was_answered_with(store: SqlStore) -> None:
    """``AttemptResult.response_headers`` go through ``finish_attempts`` as given (the worker has
    redacted them); an attempt that read no answer keeps None."""
    answered = (("Content-Type", "text/plain"), ("Set-Cookie", "[redacted]"), ("X-Id", "7"))
    http, other = [await fire_one(store, await new_job(store, name=name)) for name in ("http", "other")]
    await store.claim_runs([http.id, other.id], "w1", at(0), at(0) + LEASE)
    finishes = [
        Finish(http.id, 1, AttemptResult(Outcome.SUCCESS, status_code=200, response_headers=answered)),
        Finish(other.id, 1, AttemptResult(Outcome.FAILURE, error="boom")),
    ]
    assert set(await store.finish_attempts(finishes, "w1", at(1))) == {http.id, other.id}
    assert (await store.list_attempts(http.id))[0].response_headers == answered
    assert (await store.list_attempts(other.id))[0].response_headers is None
