"""The notifier end to end over real parts: a store, a webhook sink and an SMTP server on loopback.

A failing job notifies the webhook (signed, Standard Webhooks) and the mailbox once, and its
recovery once; a receiver that fails gets the same notification id again after the backoff; an
address the SSRF guard refuses is never contacted; a job whose slots stop running raises the
dead-man's notification once its deadline passed, and ``back`` when a slot completes again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from cronwheel.clock import ManualClock
from cronwheel.errors import BackendUnavailableError
from cronwheel.model import AttemptResult, Firing, HttpTarget, Job, Outcome, Run, RunKind, RunState, new_id
from cronwheel.notifications.rules import (
    Condition,
    EmailChannel,
    Rule,
    SlackChannel,
    WebhookChannel,
    job_scope,
    team_scope,
)
from cronwheel.notifier.channels import Senders, SmtpSettings
from cronwheel.notifier.loop import Notifier
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.secrets.signing import new_signing_secret
from cronwheel.store.sql import SqlStore
from cronwheel.telemetry import metrics
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor

from .conftest import KEYS, START, Mailbox, Sink, put_secret


async def _job(store: SqlStore, name: str = "backup", schedule: str = "* * * * *") -> Job:
    return await store.create_job(
        Job(new_id(), "ops", name, schedule, HttpTarget("https://example.com/x"),
            created_at=START, updated_at=START, next_run_at=START)
    )  # fmt: skip


async def _run_slot(store: SqlStore, job: Job, slot: datetime, outcome: Outcome) -> None:
    """Record the slot's run, claim it and finish it with ``outcome`` (what a worker does)."""
    current = await store.get_job(job.id)
    run = Run(new_id(), job.id, RunKind.SCHEDULED, slot, RunState.PENDING, job_version=current.version)
    await store.fire(
        [Firing(job.id, current.version, current.next_run_at, slot + timedelta(minutes=1), (run,))], slot
    )
    await store.mark_queued([run.id], slot)
    assert await store.claim_run(run.id, "w1", slot, slot + timedelta(seconds=30)) is not None
    assert await store.finish_attempt(run.id, 1, "w1", AttemptResult(outcome), slot, None) is not None


def _count(counter: object, channel: str) -> float:
    return float(counter.labels(channel)._value.get())  # type: ignore[attr-defined]


async def test_a_failing_job_notifies_webhook_and_mail_once_and_its_recovery_once(
    store: SqlStore, notifier: Notifier, sink: Sink, mailbox: tuple[Mailbox, SmtpSettings], clock: ManualClock
) -> None:
    box, _ = mailbox
    secret = new_signing_secret()
    await put_secret(store, "ops", "hooks", secret)
    hook = WebhookChannel(f"{sink.url}/notify", signing_secret="hooks")
    rule = Rule(
        frozenset({Condition.FAILURE, Condition.RECOVERY}), (hook, EmailChannel(("ops@example.com",)))
    )
    await store.set_notification_rules(team_scope("ops"), "ops", None, (rule,))
    job = await _job(store)
    sent_before = _count(metrics.NOTIFICATIONS_SENT, "webhook")
    for minute in range(10):
        await _run_slot(store, job, START + timedelta(minutes=minute), Outcome.FAILURE)
    clock.set(START + timedelta(minutes=10))
    await notifier.tick()
    assert len(sink.seen) == 1
    assert len(box.messages) == 1
    headers, body = sink.seen[0]
    stamp = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)  # the manual clock's time
    signature = Webhook(secret).sign(headers["webhook-id"], stamp, body.decode())  # the reference library
    assert headers["webhook-signature"] == signature  # signed as targets are
    message = json.loads(body)
    assert message["event"] == "failure"
    assert message["job"] == {"id": job.id, "name": "backup"}
    assert headers["webhook-id"] == message["id"]
    assert box.messages[0]["Message-ID"] == f"<{message['id']}@cronwheel>"
    assert "backup failed" in box.messages[0]["Subject"]
    assert box.recipients == [["ops@example.com"]]
    for minute in (10, 11, 12):
        await _run_slot(store, job, START + timedelta(minutes=minute), Outcome.SUCCESS)
    clock.set(START + timedelta(minutes=13))
    await notifier.tick()
    await notifier.tick()  # nothing new: delivered rows are not sent again
    assert [json.loads(b)["event"] for _, b in sink.seen] == ["failure", "recovery"]
    assert ["recovered" in m["Subject"] for m in box.messages] == [False, True]
    assert _count(metrics.NOTIFICATIONS_SENT, "webhook") - sent_before == 2


async def test_a_failed_delivery_is_retried_after_the_backoff_with_the_same_id(
    store: SqlStore, notifier: Notifier, sink: Sink, clock: ManualClock
) -> None:
    sink.statuses = [500, 503]
    rule = Rule(frozenset({Condition.CHANGE}), (SlackChannel(f"{sink.url}/slack"),))
    job = await _job(store)
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    await _run_slot(store, job, START, Outcome.FAILURE)
    failed_before = _count(metrics.NOTIFICATIONS_FAILED, "slack")
    clock.set(START + timedelta(seconds=5))
    await notifier.tick()
    clock.advance(1)  # before the first retry (2 s): nothing is sent
    await notifier.tick()
    assert len(sink.seen) == 1
    clock.advance(1.5)
    await notifier.tick()
    clock.advance(4.5)  # the second retry waits 4 s
    await notifier.tick()
    assert len(sink.seen) == 3
    assert len({headers["webhook-id"] for headers, _ in sink.seen}) == 1
    assert json.loads(sink.seen[0][1]) == {
        "text": "cronwheel: job ops/backup failed (slot 2026-03-02T12:00:00+00:00)"
    }
    assert _count(metrics.NOTIFICATIONS_FAILED, "slack") - failed_before == 2
    (row,) = await store.outbox(job.id)
    assert (row["state"], row["attempts"]) == ("sent", 3)


async def test_the_ssrf_guard_refuses_a_notification_webhook_to_a_private_address(
    store: SqlStore, sink: Sink, clock: ManualClock
) -> None:
    http = HttpExecutor(
        WorkerSettings(), clock=clock, secrets=SecretResolver(store, KEYS)
    )  # no allowed networks
    notifier = Notifier(store, Senders(http, None, clock), clock, rand=lambda: 0.0)
    try:
        rule = Rule(
            frozenset({Condition.FAILURE}), (WebhookChannel(f"{sink.url}/x"), EmailChannel(("a@b.example",)))
        )
        job = await _job(store)
        await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
        await _run_slot(store, job, START, Outcome.FAILURE)
        await notifier.tick()
    finally:
        await http.close()
    assert sink.seen == []
    errors = sorted(row["last_error"] for row in await store.outbox(job.id))
    assert "no SMTP relay is configured" in errors[0]
    assert "refused by the SSRF guard" in errors[1]


async def test_the_dead_mans_switch_raises_missed_once_then_back(
    store: SqlStore, notifier: Notifier, sink: Sink, clock: ManualClock
) -> None:
    """No scheduler runs: the job's slots are never fired. Deadline 90 s after each slot."""
    rule = Rule(frozenset({Condition.MISSED}), (WebhookChannel(f"{sink.url}/dms"),), deadline_s=90)
    await store.set_notification_rules(team_scope("ops"), "ops", None, (rule,))
    job = await _job(store)
    clock.set(START + timedelta(seconds=89))  # the first slot (12:00) is not due yet
    await notifier.watch(clock.now())
    await notifier.deliver(clock.now())
    assert sink.seen == []
    clock.set(START + timedelta(seconds=91))  # 12:00 + 90 s passed without a terminal run
    await notifier.watch(clock.now())
    await notifier.deliver(clock.now())
    assert [json.loads(b)["event"] for _, b in sink.seen] == ["missed"]
    assert json.loads(sink.seen[0][1])["slot"] == START.isoformat()
    for minutes in (3, 5):  # still missed: no second notification
        clock.set(START + timedelta(minutes=minutes))
        await notifier.watch(clock.now())
        await notifier.deliver(clock.now())
    assert len(sink.seen) == 1
    await _run_slot(store, job, START + timedelta(minutes=6), Outcome.FAILURE)  # a slot completes again
    clock.set(START + timedelta(minutes=7, seconds=40))  # latest slot 90 s old: 12:06
    await notifier.tick()
    assert [json.loads(b)["event"] for _, b in sink.seen] == ["missed", "back"]


async def test_a_paused_or_ruleless_job_is_not_watched(
    store: SqlStore, notifier: Notifier, sink: Sink
) -> None:
    rule = Rule(frozenset({Condition.MISSED}), (WebhookChannel(f"{sink.url}/dms"),), deadline_s=60)
    job = await _job(store)
    await store.set_notification_rules(team_scope("other"), "other", None, (rule,))
    assert await notifier.watch(START + timedelta(hours=1)) == 0
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    current = await store.get_job(job.id)
    from dataclasses import replace

    await store.update_job(replace(current, paused=True), current.version)
    assert await notifier.watch(START + timedelta(hours=1)) == 0


async def test_delivered_rows_are_pruned_after_a_week(
    store: SqlStore, notifier: Notifier, sink: Sink, clock: ManualClock
) -> None:
    rule = Rule(frozenset({Condition.FAILURE}), (WebhookChannel(f"{sink.url}/x"),))
    job = await _job(store)
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    await _run_slot(store, job, START, Outcome.FAILURE)
    await notifier.tick()
    assert [row["state"] for row in await store.outbox()] == ["sent"]
    clock.advance(7 * 86400 - 60)
    await notifier.tick()
    assert len(await store.outbox()) == 1
    clock.advance(120)
    await notifier.tick()
    assert await store.outbox() == []


async def test_an_email_subject_is_one_line_whatever_the_reason_holds(
    store: SqlStore, notifier: Notifier, mailbox: tuple[Mailbox, SmtpSettings]
) -> None:
    box, _ = mailbox
    rule = Rule(frozenset({Condition.FAILURE}), (EmailChannel(("ops@example.com",)),))
    job = await _job(store)
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    current = await store.get_job(job.id)
    run = Run(new_id(), job.id, RunKind.SCHEDULED, START, RunState.PENDING, job_version=current.version)
    await store.fire(
        [Firing(job.id, current.version, current.next_run_at, START + timedelta(minutes=1), (run,))], START
    )
    await store.fail_run(run.id, "cancelled\r\nBcc: everyone@example.com", START)
    await notifier.tick()
    (message,) = box.messages
    unfolded = " ".join(str(message["Subject"]).split())  # a long header is folded on the wire
    assert unfolded.endswith("failed (slot 2026-03-02T12:00:00+00:00): cancelled Bcc: everyone@example.com")
    assert message["Bcc"] is None


async def test_only_the_holder_of_the_watchdog_duty_passes(
    store: SqlStore, notifier: Notifier, sink: Sink
) -> None:
    rule = Rule(frozenset({Condition.FAILURE}), (WebhookChannel(f"{sink.url}/x"),))
    job = await _job(store)
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    await _run_slot(store, job, START, Outcome.FAILURE)
    holds = False

    async def held() -> bool:
        return holds

    assert await notifier.step(held) == notifier.every_s
    assert await store.outbox() == []  # not its duty: the inbox waits for the holder
    holds = True
    await notifier.step(held)
    assert [row["state"] for row in await store.outbox()] == ["sent"]
    assert len(sink.seen) == 1


async def test_a_holder_whose_store_keeps_failing_says_it_cannot_watch(
    notifier: Notifier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its coordinator then gives the watchdog duty to a node that can (tests/coordinator)."""
    down = True
    working = SqlStore.process_notification_inbox

    async def process_inbox(self: SqlStore, now: datetime, limit: int = 500) -> int:
        if down:
            raise BackendUnavailableError("the store does not answer")
        return await working(self, now, limit)

    async def held() -> bool:
        return True

    monkeypatch.setattr(SqlStore, "process_notification_inbox", process_inbox)
    assert notifier.able()
    assert await notifier.step(held) < notifier.every_s  # the loop's backoff: 0.1 s, 0.2 s ...
    clock.advance(9)
    await notifier.step(held)
    assert notifier.able()  # failing for 9 s: not yet (unable after 10 s on end)
    clock.advance(2)
    assert not notifier.able()
    down = False
    assert await notifier.step(held) == notifier.every_s
    assert notifier.able()  # a pass went through
    down = True
    await notifier.step(held)
    clock.advance(11)
    assert not notifier.able()

    async def elsewhere() -> bool:
        return False

    await notifier.step(elsewhere)
    assert notifier.able()  # not its duty any more: nothing counts against it, it may take it again
