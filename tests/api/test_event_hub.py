"""The one reader of changes behind the event streams (cronwheel.api.events.hub) on live stores: in
a cluster, another process's job write reaches a stream through the store's LISTEN and a run
fired there through the shared read of the run history; embedded, the in-process feed; a
deleted job, and the listener's "reload everything"."""

from __future__ import annotations

from dataclasses import replace

from cronwheel.api.events.hub import EventHub, Subscription
from cronwheel.api.events.topics import RELOAD, Change, Topics, job_change
from cronwheel.jobs.service import ChangeFeed
from cronwheel.limits import Limits
from cronwheel.store.change_listener import RELOAD_ALL, PostgresChangeListener
from cronwheel.store.sql import SqlStore, open_store
from store.support import START, fire_one, make_job

WAIT_S = 5.0
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
