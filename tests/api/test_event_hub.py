"""The one reader of changes behind the event streams (cronwheel.api.events.hub) on live stores: in
a cluster, another process's job write reaches a stream through the store's LISTEN and a run
fired there through the shared read of the run history; embedded, the in-process feed; a
deleted job, and the listener's "reload everything"."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from cronwheel.api.events.hub import EventHub, Subscription
from cronwheel.api.events.topics import RELOAD, Change, Topics, job_change
from cronwheel.jobs.service import ChangeFeed
from cronwheel.limits import Limits
from cronwheel.model import LiveOutput, utc_text
from cronwheel.store.change_listener import RELOAD_ALL, PostgresChangeListener
from cronwheel.store.sql import SqlStore, open_store
from store.support import START, fire_one, make_job

WAIT_S = 5.0
SECOND = timedelta(seconds=1)
EVERYTHING = Topics(jobs=True, runs=True)


async def _next(subscription: Subscription) -> Change:
    change = await subscription.next(WAIT_S)
    assert change is not None, "nothing heard"
    return change


async def test_a_cluster_stream_hears_another_process_through_the_store(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    writer = await open_store(postgres_url)  # another api or scheduler process
    try:
        async with PostgresChangeListener(postgres_url) as listener:
            hub = EventHub(postgres_store, Limits, listener, None, poll_s=0.05)
            subscription = hub.open("caller", frozenset({"data"}), EVERYTHING)
            try:
                job = await writer.create_job(make_job(team="data"))
                assert await _next(subscription) == job_change(job.id, "data", job.version)
                run = await fire_one(writer, job)
                change = await _next(subscription)
                assert (change.kind, change.run_id, change.data["state"]) == ("run", run.id, "PENDING")
                await writer.delete_job(job.id, START)
                assert await _next(subscription) == job_change(job.id, "data", None)
            finally:
                await hub.close(subscription)
            assert len(hub) == 0
    finally:
        await writer.close()


async def test_an_embedded_stream_hears_the_feed_and_is_told_to_reload(store: SqlStore) -> None:
    feed = ChangeFeed()
    hub = EventHub(store, Limits, feed, None, poll_s=0.05)
    subscription = hub.open("caller", None, Topics(jobs=True))
    try:
        job = await store.create_job(make_job(team="data"))
        edited = await store.update_job(replace(job, description="edited"), job.version)
        feed.job_changed(job.id)
        assert await _next(subscription) == job_change(job.id, "data", edited.version)
        feed.job_changed("never-made")  # no such job: nothing to tell
        feed.job_changed(RELOAD_ALL)
        assert await _next(subscription) == RELOAD
        assert await subscription.next(0.2) is None
    finally:
        await hub.close(subscription)
    assert len(hub) == 0
    assert feed._subscribers == []  # no stream: the hub no longer listens


class _CountingStore:
    """``store`` with its reads of output counted (the hub makes one per poll, however many
    streams follow runs)."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.output_reads: list[list[str]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def output_changes(self, run_ids: list[str]) -> object:
        self.output_reads.append(list(run_ids))
        return await self._store.output_changes(run_ids)


async def test_a_running_attempts_output_reaches_the_streams_that_follow_its_run_by_id(
    postgres_store: SqlStore, postgres_url: str
) -> None:
    """Another process (a worker) writes the output so far; each stream following the run by id
    hears it once per write, with one read of the store per poll for every stream; a stream of
    every run (``runs``) does not hear it."""
    worker = await open_store(postgres_url)
    counting = _CountingStore(postgres_store)
    hub = EventHub(counting, Limits, None, None, poll_s=0.05)  # type: ignore[arg-type]
    try:
        job = await worker.create_job(make_job(team="data"))
        run = await fire_one(worker, job)
        await worker.claim_run(run.id, "w1", START, START + timedelta(seconds=30))
        first = hub.open("one", frozenset({"data"}), Topics(run_ids=frozenset({run.id})))
        second = hub.open("two", None, Topics(run_ids=frozenset({run.id, "other"})))
        everything = hub.open("three", None, Topics(runs=True))
        try:
            await worker.write_outputs([LiveOutput(run.id, 1, "first\n")], "w1", START)
            for subscription in (first, second):
                change = await _next_of(subscription, "output")
                assert change.data == {"id": run.id, "job_id": job.id, "team": "data", "attempt": 1,
                                       "output": "first\n", "at": utc_text(START)}  # fmt: skip
            await worker.write_outputs([LiveOutput(run.id, 1, "first\nsecond\n")], "w1", START + SECOND)
            assert (await _next_of(first, "output")).data["output"] == "first\nsecond\n"
            assert await _kinds(first, 0.2) == set()  # told once: nothing new since
            assert "output" not in await _kinds(everything, 0.2)
            assert counting.output_reads
            assert all(ids == sorted({run.id, "other"}) for ids in counting.output_reads)
        finally:
            for subscription in (first, second, everything):
                await hub.close(subscription)
    finally:
        await worker.close()


async def _next_of(subscription: Subscription, kind: str) -> Change:
    while True:
        change = await _next(subscription)
        if change.kind == kind:
            return change


async def _kinds(subscription: Subscription, within_s: float) -> set[str]:
    kinds: set[str] = set()
    while (change := await subscription.next(within_s)) is not None:
        kinds.add(change.kind)
    return kinds
