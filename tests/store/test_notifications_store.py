"""Notifications in the store, on every backend: a run's terminal state reaches the notifier's
inbox in its own transaction, and deciding turns a *change* of a job's state into one outbox row
per channel (a job failing ten times in a row: one ``failure``; then one ``recovery``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwheel.audit import Actor, AuditAction, AuditQuery
from cronwheel.clock import ManualClock
from cronwheel.model import AttemptResult, Job, Outcome, RunState, SecretRef
from cronwheel.notifications.message import Observation
from cronwheel.notifications.rules import (
    Condition,
    EmailChannel,
    Rule,
    SlackChannel,
    WebhookChannel,
    job_scope,
    team_scope,
)
from cronwheel.store.sql import SqlStore
from cronwheel.store.sql import notifications as notices

from .support import LEASE, at, firing_of, make_job, make_run

HOOK = WebhookChannel("https://hooks.example.com/cronwheel")
MAIL = EmailChannel(("ops@example.com",))
ON_CHANGE = Rule(frozenset({Condition.FAILURE, Condition.RECOVERY}), (HOOK, MAIL))


async def _finish_slot(
    store: SqlStore, job: Job, minute: int, outcome: Outcome, queued_late_s: float = 0
) -> str:
    """Fire the job's slot ``minute``, claim it, and finish its one attempt with ``outcome``."""
    current = await store.get_job(job.id)
    run = make_run(current, at(minute))
    await store.fire([firing_of(current, run, following=at(minute + 1))], at(minute))
    await store.mark_queued([run.id], at(minute) + timedelta(seconds=queued_late_s))
    now = at(minute) + timedelta(seconds=queued_late_s + 1)
    assert await store.claim_run(run.id, "w1", now, now + LEASE) is not None
    finished = await store.finish_attempt(run.id, 1, "w1", AttemptResult(outcome), now, None)
    assert finished is not None
    assert finished.state.terminal
    return run.id


async def _events(store: SqlStore, job_id: str) -> list[tuple[str, str]]:
    return [(row["event"], row["channel"]["type"]) for row in await store.outbox(job_id)]


async def test_ten_failures_notify_once_and_the_recovery_once(store: SqlStore, clock: ManualClock) -> None:
    job = await store.create_job(make_job(next_run_at=at(0)))
    await store.set_notification_rules(team_scope("ops"), "ops", None, (ON_CHANGE,))
    failed = [await _finish_slot(store, job, minute, Outcome.FAILURE) for minute in range(10)]
    assert await store.process_notification_inbox(at(11)) == 10
    assert await _events(store, job.id) == [("failure", "webhook"), ("failure", "email")]
    first = (await store.outbox(job.id))[0]
    assert first["message"]["run_id"] == failed[0]  # about the run that changed the state
    for minute in (10, 11):
        await _finish_slot(store, job, minute, Outcome.SUCCESS)
    await store.process_notification_inbox(at(12))
    assert [event for event, _ in await _events(store, job.id)] == ["failure"] * 2 + ["recovery"] * 2
    await _finish_slot(store, job, 12, Outcome.FAILURE)
    await store.process_notification_inbox(at(13))
    assert [event for event, _ in await _events(store, job.id)].count("failure") == 4  # a new transition


async def test_state_carries_across_passes_and_the_inbox_empties(store: SqlStore) -> None:
    job = await store.create_job(make_job(next_run_at=at(0)))
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (ON_CHANGE,))
    for minute in range(3):  # one pass per failure: the state is the store's, not the pass's
        await _finish_slot(store, job, minute, Outcome.FAILURE)
        await store.process_notification_inbox(at(minute) + timedelta(seconds=30))
    assert [event for event, _ in await _events(store, job.id)] == ["failure", "failure"]
    assert await store.process_notification_inbox(at(5)) == 0


async def test_a_job_rule_replaces_the_team_default_and_no_rule_notifies_nothing(store: SqlStore) -> None:
    quiet = await store.create_job(make_job("quiet", next_run_at=at(0)))
    loud = await store.create_job(make_job("loud", next_run_at=at(0), team="web"))
    await store.set_notification_rules(team_scope("ops"), "ops", None, (ON_CHANGE,))
    only_mail = Rule(frozenset({Condition.FAILURE}), (MAIL,))
    await store.set_notification_rules(job_scope(quiet.id), "ops", quiet.id, (only_mail,))
    await _finish_slot(store, quiet, 0, Outcome.FAILURE)
    await _finish_slot(store, loud, 0, Outcome.FAILURE)  # team web has no rules
    await store.process_notification_inbox(at(2))
    assert await _events(store, quiet.id) == [("failure", "email")]
    assert await _events(store, loud.id) == []
    assert await store.notification_rules(job_scope(quiet.id)) == (only_mail,)
    assert await store.delete_notification_rules(job_scope(quiet.id)) is True
    assert await store.notification_rules(job_scope(quiet.id)) is None


async def test_late_fires_notify_once_per_transition(store: SqlStore) -> None:
    job = await store.create_job(make_job(next_run_at=at(0)))
    rule = Rule(frozenset({Condition.LATE}), (HOOK,), late_s=30)
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    for minute, late in [(0, 5), (1, 45), (2, 50), (3, 1), (4, 40)]:
        await _finish_slot(store, job, minute, Outcome.SUCCESS, queued_late_s=late)
    await store.process_notification_inbox(at(6))
    rows = await store.outbox(job.id)
    assert [row["event"] for row in rows] == ["late", "late"]  # minutes 1 and 4: two transitions


async def test_a_failed_run_without_attempt_and_a_deleted_job(store: SqlStore) -> None:
    job = await store.create_job(make_job(next_run_at=at(0)))
    await store.set_notification_rules(team_scope("ops"), "ops", None, (ON_CHANGE,))
    run = make_run(job, at(0))
    await store.fire([firing_of(job, run, following=at(1))], at(0))
    failed = await store.fail_run(run.id, "cancelled", at(0))
    assert failed is not None
    assert failed.state is RunState.FAILED
    await store.process_notification_inbox(at(1))
    rows = await store.outbox(job.id)
    assert [row["message"]["detail"] for row in rows] == ["cancelled", "cancelled"]


async def test_watching_and_terminal_slots_for_the_dead_mans_switch(store: SqlStore) -> None:
    watched = await store.create_job(make_job("watched", next_run_at=at(0)))
    other = await store.create_job(make_job("other", next_run_at=at(0)))
    paused = await store.create_job(make_job("paused", next_run_at=at(0), paused=True))
    missed = Rule(frozenset({Condition.MISSED}), (HOOK,), deadline_s=120)
    await store.set_notification_rules(team_scope("ops"), "ops", None, (missed,))
    await store.set_notification_rules(
        job_scope(other.id), "ops", other.id, (ON_CHANGE,)
    )  # its own: no missed
    found = await store.watched_jobs(Condition.MISSED)
    assert [(job.id, rules) for job, rules in found] == [(watched.id, (missed,))]
    assert paused.id not in {job.id for job, _ in found}
    await _finish_slot(store, watched, 0, Outcome.SUCCESS)
    running = make_run(await store.get_job(watched.id), at(1))
    await store.fire([firing_of(await store.get_job(watched.id), running, following=at(2))], at(1))
    asked = [(watched.id, at(0)), (watched.id, at(1)), (watched.id, at(2)), (other.id, at(0))]
    assert await store.terminal_slots(asked) == {(watched.id, at(0))}


async def test_two_notifiers_deciding_the_same_notification_never_conflict(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notifier about to lose the watchdog duty may still be in its pass while the next holder
    decides the same change: both read the state before either wrote. The second write of the
    state and of the outbox rows is no error, and the outbox holds each row once."""
    job = await store.create_job(make_job(next_run_at=at(0)))
    missed = Rule(frozenset({Condition.MISSED}), (HOOK, MAIL), deadline_s=120)
    aspect = f"missed>{missed.deadline_s:g}"
    seen = Observation(job.id, "ops", job.name, (missed,), {aspect: "missed"}, subject="slot:0", slot=at(0))

    async def nothing_written(connection: object, job_ids: list[str]) -> dict[str, dict[str, str]]:
        return {}  # as read before the other notifier committed

    async def all_fresh(connection: object, ids: list[str]) -> list[str]:
        return ids

    monkeypatch.setattr(notices, "_health", nothing_written)
    monkeypatch.setattr(notices, "_not_yet_written", all_fresh)
    assert await store.record_observations([seen], at(3)) == 2
    assert await store.record_observations([seen], at(3)) == 2  # it believes it wrote them: no ConflictError
    assert await _events(store, job.id) == [("missed", "webhook"), ("missed", "email")]


async def test_a_channel_url_given_as_a_secret_reference_is_kept_as_one(store: SqlStore) -> None:
    """The rules, their outbox rows and what the notifier reads back keep the reference (the
    name, never a value); the audit log keeps it as it is, and a URL in clear cut to its host."""
    job = await store.create_job(make_job(next_run_at=at(0)))
    slack = SlackChannel(SecretRef("slack-url"))
    hook = WebhookChannel(SecretRef("hook-url"), signing_secret="hooks")
    rule = Rule(frozenset({Condition.FAILURE}), (slack, hook, HOOK))
    actor = Actor("token", "tok-1", "deploy-bot", "192.0.2.7")
    entry = actor.entry(
        AuditAction.NOTIFICATIONS_SET, at(0), "ops", ("notifications", team_scope("ops"), "ops")
    )
    await store.set_notification_rules(team_scope("ops"), "ops", None, (rule,), audit=entry)
    assert await store.notification_rules(team_scope("ops")) == (rule,)
    await _finish_slot(store, job, 0, Outcome.FAILURE)
    await store.process_notification_inbox(at(2))
    rows = await store.outbox(job.id)
    assert sorted(repr(row["channel"]["url"]) for row in rows) == [
        "'https://hooks.example.com/cronwheel'",
        "{'secret': 'hook-url'}",
        "{'secret': 'slack-url'}",
    ]
    due = await store.due_deliveries(at(2))
    assert sorted(map(repr, (delivery.channel for delivery in due))) == sorted(map(repr, rule.channels))
    (audited,) = (await store.list_audit(AuditQuery(action="notifications"))).items
    assert audited.after is not None
    assert [channel["url"] for channel in audited.after["rules"][0]["channels"]] == [
        {"secret": "slack-url"},
        {"secret": "hook-url"},
        "https://hooks.example.com/...",
    ]
