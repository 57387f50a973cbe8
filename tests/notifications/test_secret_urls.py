"""A channel URL given as a reference to a team secret: the notifier resolves it at each delivery
and sends to it (a real delivery to the loopback sink); a URL the secret holds goes through the
checks a target URL does at its attempts (the SSRF guard, what the HTTP client refuses), and a
secret that is missing fails the delivery saying which, with no URL in the reason or the log."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from cronwheel.clock import ManualClock
from cronwheel.model import HttpTarget, Job, Outcome, SecretRef, new_id
from cronwheel.notifications.rules import Condition, Rule, SlackChannel, WebhookChannel, job_scope
from cronwheel.notifier.channels import Senders
from cronwheel.notifier.loop import Notifier
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.secrets.signing import new_signing_secret
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor

from .conftest import KEYS, START, Sink, put_secret
from .test_notifier import _run_slot

TOKEN = "s3cr3t-t0k3n"


async def _failing_job(store: SqlStore, rule: Rule) -> Job:
    job = await store.create_job(
        Job(new_id(), "ops", "backup", "* * * * *", HttpTarget("https://example.com/x"),
            created_at=START, updated_at=START, next_run_at=START)
    )  # fmt: skip
    await store.set_notification_rules(job_scope(job.id), "ops", job.id, (rule,))
    await _run_slot(store, job, START, Outcome.FAILURE)
    return job


async def test_a_slack_url_held_by_a_secret_is_resolved_at_delivery(
    store: SqlStore, notifier: Notifier, sink: Sink, clock: ManualClock
) -> None:
    await put_secret(store, "ops", "slack-url", f"{sink.url}/services/T000/B000/{TOKEN}")
    await put_secret(store, "ops", "hooks", new_signing_secret())
    rule = Rule(
        frozenset({Condition.FAILURE}),
        (
            SlackChannel(SecretRef("slack-url")),
            WebhookChannel(SecretRef("slack-url"), signing_secret="hooks"),
        ),
    )
    job = await _failing_job(store, rule)
    clock.set(START + timedelta(seconds=5))
    await notifier.tick()
    assert sink.paths == [f"/services/T000/B000/{TOKEN}"] * 2
    bodies = sorted((json.loads(body) for _, body in sink.seen), key=len)
    assert bodies[0] == {"text": "cronwheel: job ops/backup failed (slot 2026-03-02T12:00:00+00:00)"}
    assert bodies[1]["event"] == "failure"
    assert "webhook-signature" in sink.seen[0][0]
    assert {row["state"] for row in await store.outbox(job.id)} == {"sent"}
    assert all(row["channel"]["url"] == {"secret": "slack-url"} for row in await store.outbox(job.id))


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "slack channel url: secret 'slack-url' does not exist in team 'ops'"),
        (f"http://10.1.2.3/services/T000/B000/{TOKEN}", "refused by the SSRF guard"),
        (f"https://hooks%09.example.com/services/{TOKEN}", "which no host name may contain"),
        (f"ftp://hooks.example.com/{TOKEN}", "must be an absolute http:// or https:// URL"),
    ],
    ids=["missing", "ssrf", "code-point", "scheme"],
)
async def test_a_secret_that_is_missing_or_holds_a_refused_url_fails_the_delivery_without_leaking(
    store: SqlStore,
    notifier: Notifier,
    sink: Sink,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    value: str | None,
    reason: str,
) -> None:
    if value is not None:
        await put_secret(store, "ops", "slack-url", value)
    job = await _failing_job(
        store, Rule(frozenset({Condition.FAILURE}), (SlackChannel(SecretRef("slack-url")),))
    )
    clock.set(START + timedelta(seconds=5))
    with caplog.at_level(logging.DEBUG):
        await notifier.tick()
    assert sink.seen == []
    (row,) = await store.outbox(job.id)
    assert (row["state"], row["attempts"]) == ("pending", 1)  # retried: the secret may be set meanwhile
    assert reason in row["last_error"]
    assert "notification not delivered" in caplog.text
    assert TOKEN not in row["last_error"]
    assert TOKEN not in caplog.text
    assert all(TOKEN not in repr(record.__dict__) for record in caplog.records)


async def test_a_reference_is_resolved_again_at_each_delivery(
    store: SqlStore, sink: Sink, clock: ManualClock
) -> None:
    """A secret set after a failed try is used by the retry (the resolver's cache is short)."""
    http = HttpExecutor(
        WorkerSettings(allowed_networks=("127.0.0.0/8",)),
        clock=clock,
        secrets=SecretResolver(store, KEYS, clock=clock),
    )
    notifier = Notifier(store, Senders(http, None, clock), clock, rand=lambda: 0.0)
    try:
        job = await _failing_job(
            store, Rule(frozenset({Condition.FAILURE}), (SlackChannel(SecretRef("late")),))
        )
        await notifier.tick()
        assert sink.seen == []
        await put_secret(store, "ops", "late", f"{sink.url}/hook/{TOKEN}")
        clock.advance(10)
        await notifier.tick()
    finally:
        await http.close()
    assert sink.paths == [f"/hook/{TOKEN}"]
    (row,) = await store.outbox(job.id)
    assert (row["state"], row["attempts"]) == ("sent", 2)
