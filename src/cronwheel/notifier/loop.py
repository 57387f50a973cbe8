"""The notifier: decides notifications from the store's inbox, runs the dead-man's switch, and
delivers the outbox with retries. One works per cluster: the holder of the watchdog duty, which
every node campaigns for whatever its roles (:meth:`cronwheel.coordinator.Coordinator.watchdog`),
so that it keeps watching when every scheduler has stopped; embedded, the server. Every node runs
one, idle while another holds the duty. A holder whose passes keep failing (its store does not
answer) says it cannot do the duty (:meth:`Notifier.able`), and gives it up to one that can.

Each pass (every ``every_s``):

1. :meth:`decide`: the runs that reached SUCCESS or FAILED since the last pass (the inbox, written
   in the transaction of each state change) become notifications in the outbox, in the same
   transaction as the jobs' new notification state (:mod:`cronwheel.store.sql.notifications`);
2. :meth:`watch` (every ``watch_every_s``, :data:`WATCH_EVERY_S`): the dead-man's switch. For
   each job whose rules ask for ``missed``, and each such rule's ``deadline_s``: the latest slot
   of its schedule (computed from the schedule, not from the runs) at least ``deadline_s`` old
   (and not before the job existed) must have a terminal run. If not, the job is ``missed`` (one
   notification); when a later such slot has one again, ``back``. This sees slots that were
   never fired at all (no scheduler running: no run exists) as well as runs stuck before a
   terminal state;
3. :meth:`deliver`: due outbox rows are sent; a failed try is retried after
   :data:`DELIVERY` backoff, and given up (state ``failed``) after its attempts. Rows delivered
   or given up are pruned after :data:`KEEP_DELIVERED`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from cronwheel.clock import Clock
from cronwheel.errors import TransientError
from cronwheel.model import Job
from cronwheel.notifications.decide import missed_aspect
from cronwheel.notifications.message import Observation
from cronwheel.notifications.rules import Condition, Rule
from cronwheel.notifier.channels import Senders, SmtpSettings
from cronwheel.retrying import LOOP, Backoff, pause
from cronwheel.scheduler.planner import last_slots
from cronwheel.secrets.crypto import Keyring
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.store.port import NoticeStore, Store
from cronwheel.telemetry import metrics
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor

log = logging.getLogger("cronwheel.notifier")

WATCH_EVERY_S = 5.0  # the dead-man's switch's check period
UNABLE_AFTER_S = 10.0  # a holder whose passes fail this long on end gives the watchdog duty up
KEEP_DELIVERED = timedelta(days=7)  # outbox rows delivered (or given up) are kept this long, then pruned
# A delivery's tries: 2 s, 4 s, 8 s ... up to 10 min between them, 12 tries in all (about an hour).
DELIVERY = Backoff(first_s=2.0, multiplier=2.0, cap_s=600.0, jitter=0.25, attempts=12)


class Notifier:
    backoff: Backoff = LOOP  # waits after a transient failure of a pass

    def __init__(
        self,
        store: NoticeStore,
        senders: Senders,
        clock: Clock,
        *,
        every_s: float = 1.0,
        watch_every_s: float = WATCH_EVERY_S,
        unable_after_s: float = UNABLE_AFTER_S,
        delivery: Backoff = DELIVERY,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.senders = senders
        self.clock = clock
        self.every_s = every_s
        self.watch_every = timedelta(seconds=watch_every_s)
        self.unable_after = timedelta(seconds=unable_after_s)
        self.delivery = delivery
        self.rand = rand
        self._watched_at: datetime | None = None
        self._failing_since: datetime | None = None  # the first of the passes failing since
        self._tries = self.backoff.tracker()

    async def decide(self) -> int:
        """Turn the whole inbox into notifications; how many inbox rows were taken."""
        taken = 0
        while True:
            batch = await self.store.process_notification_inbox(self.clock.now())
            taken += batch
            if batch == 0:
                return taken

    async def watch(self, now: datetime) -> int:
        """The dead-man's switch (see the module docstring); how many outbox rows it wrote."""
        watched = await self.store.watched_jobs(Condition.MISSED)
        expected: list[tuple[Job, tuple[Rule, ...], Rule, datetime | None]] = []
        for job, rules in watched:
            for rule in rules:
                if Condition.MISSED in rule.conditions:
                    expected.append((job, rules, rule, _expected_slot(job, rule, now)))
        slots = [(job.id, slot) for job, _, _, slot in expected if slot is not None]
        done = await self.store.terminal_slots(slots)
        observations = [
            Observation(
                job.id, job.team, job.name, (rule,),
                {missed_aspect(rule): "ok" if (job.id, slot) in done else "missed"},
                subject=f"slot:{slot.isoformat()}:{rule.deadline_s:g}",
                slot=slot,
                detail=None if (job.id, slot) in done else f"no terminal run {rule.deadline_s:g} s after it",
            )
            for job, rules, rule, slot in expected
            if slot is not None
        ]  # fmt: skip
        return await self.store.record_observations(observations, now)

    async def deliver(self, now: datetime) -> int:
        """Send the due outbox rows; how many were delivered."""
        sent = 0
        for delivery in await self.store.due_deliveries(now):
            error = await self.senders.send(delivery.notification, delivery.channel, delivery.attempts + 1)
            tries = delivery.attempts + 1
            if error is None:
                sent += 1
                metrics.NOTIFICATIONS_SENT.labels(delivery.channel.type).inc()
                await self.store.mark_delivered(delivery.id, self.clock.now())
                continue
            metrics.NOTIFICATIONS_FAILED.labels(delivery.channel.type).inc()
            retry = None
            if not self.delivery.gives_up(tries):
                retry = self.clock.now() + timedelta(seconds=self.delivery.delay(tries, self.rand()))
            log.warning(
                "notification not delivered",
                extra={
                    "action": "retry" if retry else "give-up",
                    "notification": delivery.notification.id,
                    "channel": delivery.channel.type,
                    "attempt": tries,
                    "error": error,
                },
            )
            await self.store.mark_delivered(delivery.id, self.clock.now(), error, retry)
        return sent

    async def tick(self) -> None:
        """One pass: decide, watch (every ``watch_every_s``), deliver."""
        now = self.clock.now()
        await self.decide()
        if self._watched_at is None or now - self._watched_at >= self.watch_every:
            await self.watch(now)
            await self.store.prune_deliveries(now - KEEP_DELIVERED)
            self._watched_at = now
        await self.deliver(now)

    def able(self) -> bool:
        """Whether this node can do the watchdog duty: not once its passes have failed for
        ``unable_after_s`` on end (its store does not answer, or times out)."""
        failing = self._failing_since
        return failing is None or self.clock.now() - failing < self.unable_after

    async def step(self, holds: Callable[[], Awaitable[bool]] | None = None) -> float:
        """One turn of :meth:`run`: a pass if this node holds the duty (``holds`` None: always);
        how long to wait before the next turn."""
        try:
            if holds is not None and not await holds():
                self._failing_since = None  # not its duty: nothing counts against it
                return self.every_s
            await self.tick()
        except TransientError as error:
            self._failing_since = self._failing_since or self.clock.now()
            wait = self._tries.failed()
            log.warning(
                "notifier pass failed",
                extra={"action": "wait", "retry_in_s": round(wait, 3), "error": str(error)},
            )
            return wait
        self._failing_since = None
        self._tries.succeeded()
        return self.every_s

    async def run(self, stop: asyncio.Event, holds: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Pass every ``every_s`` seconds; in a cluster only while this node holds the watchdog
        duty (``holds``)."""
        while not stop.is_set():
            await pause(await self.step(holds), stop)


def _expected_slot(job: Job, rule: Rule, now: datetime) -> datetime | None:
    """The latest slot of ``job`` at least ``rule.deadline_s`` old, not before the job existed (or
    its ``start_at``); None when there is none."""
    end = now - timedelta(seconds=rule.deadline_s)
    start = max(moment for moment in (job.created_at, job.start_at) if moment is not None)
    if end < start:
        return None
    slots, _ = last_slots(job, start, end, 1)
    return slots[-1] if slots else None


def build(
    store: Store,
    clock: Clock,
    *,
    allowed_networks: tuple[str, ...] = (),
    keyring: Keyring | None = None,
    smtp_url: str | None = None,
) -> tuple[Notifier, Callable[[], Awaitable[None]]]:
    """The server's notifier, and what closes it: webhooks through an HTTP executor with the
    node's SSRF allowances and secret keys (to sign), email through ``smtp_url`` (if given)."""
    smtp = None if smtp_url is None else SmtpSettings.from_url(smtp_url)
    http = HttpExecutor(
        WorkerSettings(allowed_networks=allowed_networks),
        clock=clock,
        secrets=SecretResolver(store, keyring, clock=clock),
    )
    return Notifier(store, Senders(http, smtp, clock), clock), http.close
