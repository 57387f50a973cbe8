"""The pure decisions of the event streams (cronwheel.api.events.topics): parsing topics, which
stream hears which change, the frames, the window over run event ids; and a subscription that
falls behind (cronwheel.api.events.hub)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from cronwheel.api.events.hub import BACKLOG, Subscription
from cronwheel.api.events.topics import (
    CLUSTER,
    MAX_TOPICS,
    RELOAD,
    SLACK,
    TOPICS_PATTERN,
    RunWindow,
    Topics,
    TopicsError,
    frame,
    hears,
    job_change,
    output_change,
    parse_topics,
    run_change,
)
from cronwheel.model import OutputChange, RunState
from cronwheel.store import RunChange


def test_topics_parse_into_what_they_follow() -> None:
    assert parse_topics("jobs,job:a,run:b,job:c,cluster") == Topics(
        jobs=True, cluster=True, job_ids=frozenset({"a", "c"}), run_ids=frozenset({"b"})
    )
    assert parse_topics("runs") == Topics(runs=True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty topic"),
        ("jobs,", "empty topic"),
        ("job:", "unknown topic 'job:'"),
        ("jobs, runs", "unknown topic ' runs'"),
        ("team:data", "unknown topic"),
        (",".join(["jobs"] * (MAX_TOPICS + 1)), f"at most {MAX_TOPICS} topics"),
    ],
)
def test_anything_else_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(TopicsError, match=re.escape(says)):
        parse_topics(text)
    assert re.fullmatch(TOPICS_PATTERN, text) is None  # the document refuses it too


def test_the_documents_pattern_takes_what_the_parser_takes() -> None:
    for text in ("jobs", "job:01ab-cd", "runs,run:x,cluster", ",".join(["jobs"] * MAX_TOPICS)):
        assert re.fullmatch(TOPICS_PATTERN, text)
        parse_topics(text)


def _run(team: str = "data", job: str = "j1", run: str = "r1") -> RunChange:
    return RunChange(7, run, job, team, RunState.RUNNING)


def test_a_stream_hears_its_topics_of_its_callers_teams_only() -> None:
    job, run = job_change("j1", "data", 3), run_change(_run())
    data = frozenset({"data"})
    assert hears(Topics(jobs=True), data, job)
    assert not hears(Topics(jobs=True), data, run)
    assert hears(Topics(runs=True), data, run)
    assert hears(Topics(job_ids=frozenset({"j1"})), data, job)
    assert hears(Topics(job_ids=frozenset({"j1"})), data, run)  # a job's page shows its runs
    assert not hears(Topics(job_ids=frozenset({"j2"})), data, run)
    assert hears(Topics(run_ids=frozenset({"r1"})), data, run)
    assert not hears(Topics(run_ids=frozenset({"r1"})), data, job)
    for topics in (Topics(jobs=True, runs=True), Topics(job_ids=frozenset({"j1"}))):
        assert not hears(topics, frozenset({"ops"}), job)  # another team's
        assert not hears(topics, frozenset({"ops"}), run)
        assert hears(topics, None, run) == hears(topics, data, run)  # every team
    assert hears(Topics(cluster=True), frozenset({"ops"}), CLUSTER)
    assert not hears(Topics(jobs=True, runs=True), None, CLUSTER)
    assert hears(Topics(run_ids=frozenset({"x"})), frozenset({"ops"}), RELOAD)


def test_frames_say_what_changed() -> None:
    assert (
        frame(job_change("j1", "data", 3)) == b'event: job\ndata: {"id":"j1","team":"data","version":3}\n\n'
    )
    assert frame(job_change("j1", "data", None)) == (
        b'event: job\ndata: {"id":"j1","team":"data","deleted":true}\n\n'
    )
    assert frame(run_change(_run())) == (
        b'event: run\ndata: {"id":"r1","job_id":"j1","team":"data","state":"RUNNING"}\n\n'
    )
    assert frame(RELOAD) == b"event: reload\ndata: {}\n\n"


def _events(*ids: int) -> list[RunChange]:
    return [RunChange(event_id, f"r{event_id}", "j", "data", RunState.PENDING) for event_id in ids]


def test_the_window_tells_a_late_commit_once_and_nothing_from_before_it_began() -> None:
    window = RunWindow(floor=1000)
    assert window.after == 1000 - SLACK
    assert window.take(_events(999, 1001, 1003)) == _events(1001, 1003)  # 999: before following
    assert window.after == 1003 - SLACK
    assert window.take(_events(1001, 1002, 1003, 1004)) == _events(1002, 1004)  # 1002 committed late
    assert window.take(_events(1001, 1002, 1003, 1004)) == []
    far = 1004 + 2 * SLACK
    assert window.take(_events(far)) == _events(far)
    assert min(window.told) > window.after  # what falls below the window is forgotten


async def test_a_stream_that_falls_behind_is_told_to_reload() -> None:
    subscription = Subscription("caller", None, Topics(jobs=True))
    for version in range(BACKLOG + 5):  # the one past BACKLOG overflows: 4 more come after it
        subscription.offer(job_change("j1", "data", version))
    assert await subscription.next(1.0) == RELOAD  # in place of every change it held
    for version in range(BACKLOG + 1, BACKLOG + 5):
        assert await subscription.next(1.0) == job_change("j1", "data", version)
    assert await subscription.next(0.01) is None
    subscription.offer(job_change("j1", "data", 99))
    subscription.offer(run_change(_run()))  # not followed
    assert await subscription.next(1.0) == job_change("j1", "data", 99)
    assert await subscription.next(0.01) is None


def test_a_running_attempts_output_is_heard_only_by_streams_following_its_run_by_id() -> None:
    at = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    change = output_change(OutputChange("r1", "j1", "data", 2, "first\n", at))
    assert change.data == {"id": "r1", "job_id": "j1", "team": "data", "attempt": 2, "output": "first\n",
                           "at": "2026-03-02T12:00:00Z"}  # fmt: skip
    assert hears(Topics(run_ids=frozenset({"r1"})), frozenset({"data"}), change)
    assert not hears(Topics(run_ids=frozenset({"r1"})), frozenset({"ops"}), change)  # another team's
    assert not hears(Topics(runs=True), None, change)
    assert not hears(Topics(job_ids=frozenset({"j1"})), None, change)
    assert frame(change).startswith(b"event: output\ndata: {")
