"""The worker role: take triggers off the queue, claim the run, acknowledge the trigger, attempt
the run, record the outcome.

Every attempt is claimed in the store first (a conditional PENDING/RETRYING -> RUNNING write), so
a trigger delivered twice starts at most one attempt. A long attempt heartbeats its lease; if the
lease is lost (another worker took over after this one stalled) or cancellation is requested
(overlap=replace, job deleted), the attempt is stopped.

A trigger released ahead of its slot is held (:mod:`cronwheel.worker.holding`) without taking an
attempt slot, and handed to the claim at its slot by the worker's one timer task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronwheel.clock import Clock, monotonic_of
from cronwheel.errors import TransientError
from cronwheel.model import (
    LIVE_OUTPUT_MOST,
    AttemptResult,
    Finish,
    Job,
    LiveOutput,
    Outcome,
    Run,
    RunKind,
    RunState,
)
from cronwheel.queue import Delivery, Queue, Trigger
from cronwheel.retrying import LOOP, Backoff
from cronwheel.store.port import LeaseStore
from cronwheel.telemetry import metrics
from cronwheel.telemetry.tracing import NO_SPAN, OFF, Span, Tracer, ending, trace_id
from cronwheel.telemetry.tracing import runs as spans
from cronwheel.worker.executors import Executors
from cronwheel.worker.executors.base import AttemptContext, storable_text
from cronwheel.worker.executors.live import OutputSoFar
from cronwheel.worker.finisher import Finisher
from cronwheel.worker.gate import Gate
from cronwheel.worker.holding import Holding
from cronwheel.worker.retry import retry_delay, should_retry

log = logging.getLogger("cronwheel.worker")

# Attempts a worker runs at once, by default. Cron jobs come in bursts at the start of a second
# (every job of `0 * * * *` shares one), and an attempt beyond this waits for one to end, so this
# bounds how many of a burst start at once: 1,667 runs due each second in one process over SQLite
# started within p99 678 ms at 256, 166 ms at 1,024 (bigger claim and outcome batches, fewer of
# them: less CPU per run too). Attempts are cheap while they wait on I/O; CPU-bound targets have
# their own bounds (the Python executor's threads, the command isolation's limits), and the HTTP
# client at most 64 connections to one endpoint.
CONCURRENCY = 1024
OUTPUT_EVERY_S = 1.0  # a running attempt's output so far is written at most this often


def _nothing() -> None:
    pass


class Worker:
    backoff: Backoff = LOOP  # waits after a transient failure to receive, or to claim
    gather_s: float = 0.002  # how long a receive waits for more slots to free, outcomes for company

    def __init__(
        self,
        store: LeaseStore,
        queue: Queue,
        executors: Executors,
        clock: Clock,
        node: str,
        *,
        queues: Sequence[str] = ("default",),
        concurrency: int = CONCURRENCY,
        lease_s: float = 30.0,
        rng: random.Random | None = None,
        tracer: Tracer = OFF,
        gather_s: float | None = None,
        hold_most: int | None = None,
        output_every_s: float = OUTPUT_EVERY_S,
    ) -> None:
        self.store = store
        self.queue = queue
        self.executors = executors
        self.clock = clock
        self._monotonic = monotonic_of(clock).monotonic  # the timers of pauses, leases and drains
        self.node = node
        self.queues = tuple(queues)
        self.concurrency = concurrency
        self.lease = timedelta(seconds=lease_s)
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._tasks: set[asyncio.Task[None]] = set()  # claims in flight and attempts
        self._busy = 0  # slots of ``concurrency`` taken: triggers being claimed, attempts running
        self._recording = 0  # attempts whose slot was given back before their outcome was recorded
        self._paused_until = 0.0  # loop time before which no trigger is received (the store is down)
        self._claim_tries = self.backoff.tracker()  # claims that failed in a row (the store is down)
        self._attempts: dict[str, _Held] = {}  # run id -> the attempt running it
        self._keeper: asyncio.Task[None] | None = None  # heartbeats every attempt held (one task)
        self._freed = asyncio.Event()  # set when a slot of ``concurrency`` is given back
        self.gather_s = self.gather_s if gather_s is None else gather_s
        self._batch = max(1, concurrency // 8)  # free slots a receive does not wait for more beyond
        self._slots = Gate()  # opened when ``_batch`` slots are free
        self._to_claim: list[Delivery] = []  # received, not yet claimed: the claimer's next batch
        self._claimer: asyncio.Task[None] | None = None  # claims the received, one batch at a time
        # outcomes recorded many per transaction
        self.finisher = Finisher(store, clock, node, gather_s=self.gather_s, most=concurrency)
        self.tracer = tracer  # the claim and attempt spans, in each run's trace (off: none)
        # triggers received ahead of their slot (at most 4 per attempt slot: the rest stay queued)
        self.holding = Holding(4 * concurrency if hold_most is None else hold_most)
        self._waiting: deque[Delivery] = deque()  # due, waiting for an attempt slot
        self._timer: asyncio.Task[None] | None = None  # hands held triggers to the claim at their slot
        self._held_changed = asyncio.Event()  # an earlier slot is held: the timer sleeps less
        # a running attempt's output so far goes to the store at most this often (0: never)
        self.output_every_s = output_every_s

    async def run(self, stop: asyncio.Event, drain_s: float = 30.0) -> None:
        """Receive and handle triggers until ``stop``; then let running attempts finish for up to
        ``drain_s`` seconds (their leases expire and the sweep retries whatever is left). If one of
        the worker's own loops fails, the error propagates: the process stops instead of limping."""
        loops = [
            asyncio.create_task(self._receive(name, stop), name=f"worker-{name}") for name in self.queues
        ]
        loops.append(asyncio.create_task(self._watch_cancellations(stop), name="worker-cancellations"))
        if self.output_every_s > 0:
            loops.append(asyncio.create_task(self._watch_outputs(stop), name="worker-outputs"))
        stopping = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([*loops, stopping], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopping and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        finally:
            for task in [*loops, stopping]:
                task.cancel()
            await asyncio.gather(*loops, stopping, return_exceptions=True)
            await self._drain(drain_s)

    async def _drain(self, drain_s: float) -> None:
        """Let claims in flight and the attempts they start finish, for up to ``drain_s``."""
        deadline = self._monotonic() + drain_s
        while self._tasks and self._monotonic() < deadline:
            await asyncio.wait(set(self._tasks), timeout=deadline - self._monotonic())
        for task in self._tasks:
            task.cancel()

    async def _receive(self, queue_name: str, stop: asyncio.Event) -> None:
        """Receive as many triggers as there are free slots and hand them to the claimer, so
        that the next receive overlaps the claim's round trips. With few slots free while
        attempts run, wait ``gather_s`` for more to free first: one receive, one claim and one
        acknowledgement for many triggers rather than for each."""
        tries = self.backoff.tracker()
        while not stop.is_set():
            free = self.concurrency - self._busy - len(self._waiting)
            if free <= 0 or not self.holding.room():  # bounded: wait for a slot, or a held trigger's
                self._freed.clear()
                await self._freed.wait()
                continue
            if self._monotonic() < self._paused_until:
                await asyncio.sleep(self._paused_until - self._monotonic())
                continue
            if free < self._batch and self._busy and self.gather_s > 0:
                await self._slots.wait(self.gather_s)  # the slots of attempts finishing meanwhile
                free = self.concurrency - self._busy - len(self._waiting)
            try:
                limit = max(1, min(free, self.holding.room()))
                deliveries = await self.queue.receive(queue_name, self.node, limit, 1.0)
            except TransientError as error:  # the queue is down: wait and try again, don't die
                delay = tries.failed()
                log.warning(
                    "queue unavailable",
                    extra={
                        "action": "wait",
                        "node": self.node,
                        "attempt": tries.failures,
                        "retry_in_s": round(delay, 3),
                        "error": str(error),
                    },
                )
                await asyncio.sleep(delay)
                continue
            tries.succeeded()
            if deliveries:
                _count_reclaims(queue_name, deliveries)
                self.take_in(deliveries)

    # -- triggers released ahead, held until their slot ----------------------------------------

    def take_in(self, deliveries: Sequence[Delivery]) -> None:
        """Hold the deliveries whose slot is ahead (the timer hands them over at it); the
        others wait for an attempt slot."""
        due = self.holding.hold_early(deliveries, self.clock.now())
        if len(due) < len(deliveries):
            self._wake_timer()
        self._waiting.extend(due)
        self._admit()

    def release_due(self, now: datetime) -> int:
        """Hand the held triggers whose slot is ``now`` or before to the claim; returns how many."""
        due = self.holding.pop_due(now)
        if due:
            self._waiting.extend(due)
            self._admit()
            self._freed.set()  # room to hold more
        return len(due)

    def _admit(self) -> None:
        """Give waiting triggers the free attempt slots and the claimer its next batch."""
        count = min(len(self._waiting), self.concurrency - self._busy)
        if count <= 0:
            return
        self._busy += count
        self._to_claim.extend(self._waiting.popleft() for _ in range(count))
        if self._claimer is None:
            self._claimer = self._track(self._claim_all())

    def _wake_timer(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = self._track(self._release_held())
        else:
            self._held_changed.set()

    async def _release_held(self) -> None:
        """The held triggers' timer: asleep until the earliest slot held, by the worker's clock
        (woken sooner when an earlier one is held), then hands over what is due."""
        while len(self.holding):
            self.release_due(self.clock.now())
            next_at = self.holding.next_at()
            if next_at is None:
                return
            self._held_changed.clear()
            delay = (next_at - self.clock.now()).total_seconds()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._held_changed.wait(), delay)

    def _track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _claim_all(self) -> None:
        """Claim what the receive loops handed over, one batch at a time: what arrives while a
        claim is in flight goes in the next one (group commit: the batches grow with the load,
        and every receive's triggers, whatever its queue, share one store call)."""
        try:
            while self._to_claim:
                batch, self._to_claim = self._to_claim, []
                await self._start_guarded(batch)
        finally:
            self._claimer = None

    async def _start_guarded(self, deliveries: Sequence[Delivery]) -> None:
        """Claim a batch of received triggers (one store transaction for all of it) and start an
        attempt task for each claimed run. A failure leaves the triggers unacknowledged: they come
        back after the visibility timeout, and the sweep retries what the store holds."""
        started: list[tuple[Run, Job | None]] = []
        try:
            started = await self.claim(deliveries)
            self._claim_tries.succeeded()
        except TransientError as error:  # a backend is down: the sweep retries what this left behind
            delay = self._claim_tries.failed()  # receive no more meanwhile: they would fail alike
            log.warning(
                "claim interrupted: backend unavailable",
                extra={
                    "action": "wait",
                    "node": self.node,
                    "runs": len(deliveries),
                    "attempt": self._claim_tries.failures,
                    "retry_in_s": round(delay, 3),
                    "error": str(error),
                },
            )
            self._paused_until = self._monotonic() + delay
        except Exception:  # the store is the record: the sweep retries what this left behind
            log.exception(
                "claim failed", extra={"action": "error", "node": self.node, "runs": len(deliveries)}
            )
        finally:
            self._release(len(deliveries) - len(started))  # the claimed keep their slot until done
        for run, job in started:
            self._track(self._guarded(run, job))

    async def _guarded(self, run: Run, job: Job | None) -> None:
        """Attempt a claimed run and record its outcome. Its slot is given back as soon as the
        executor returns, while fewer than ``concurrency`` outcomes of this worker wait to be
        recorded: a slot stands for an attempt running, and the next one need not wait for the
        store's round trip of this one's outcome (the outcome still is recorded, by this task)."""
        slot = _Slot(self)
        try:
            await self.attempt(run, job, attempted=slot.early)
        except TransientError as error:  # a backend is down: the sweep retries what this left behind
            log.warning(
                "attempt interrupted: backend unavailable",
                extra={"action": "wait", "run_id": run.id, "error": str(error)},
            )
        except Exception:  # the store is the record: the sweep retries what this left behind
            log.exception("attempt handling failed", extra={"action": "error", "run_id": run.id})
        finally:
            slot.done()

    def _release(self, slots: int) -> None:
        """Give back ``slots`` of ``concurrency``: the receive loop, if it waits for one, goes on."""
        if slots:
            self._busy -= slots
            self._freed.set()
            if self._waiting:
                self._admit()
            if self.concurrency - self._busy >= self._batch:
                self._slots.open()

    async def _watch_cancellations(self, stop: asyncio.Event, every_s: float = 0.5) -> None:
        """Stop attempts whose run was asked to stop (overlap=replace): one read for all of them
        that have run for a pass at least (one that started since is asked at the next pass, so
        a worker of short attempts does not read the store twice a second for nothing)."""
        while not stop.is_set():
            await asyncio.sleep(every_s)
            try:
                await self.check_cancellations(running_for_s=every_s)
            except TransientError:  # the store is down: the next pass will tell
                continue

    async def check_cancellations(self, running_for_s: float = 0.0) -> None:
        """Stop the attempts, running for ``running_for_s`` at least, whose run was asked to stop."""
        started_by = self._monotonic() - running_for_s
        asked = [run_id for run_id, held in self._attempts.items() if held.since <= started_by]
        if not asked:
            return
        for run_id in await self.store.cancel_requested(asked):
            held = self._attempts.get(run_id)
            if held is not None:
                held.stop(CANCELLED_BY_REQUEST)

    # -- the output so far of the attempts held ----------------------------------------------

    async def _watch_outputs(self, stop: asyncio.Event) -> None:
        """Write the output so far of the attempts held, every ``output_every_s``."""
        while not stop.is_set():
            await asyncio.sleep(self.output_every_s)
            try:
                await self.write_outputs()
            except TransientError:  # the store is down: the next pass writes what is new then
                continue

    async def write_outputs(self) -> int:
        """Write, in one store call, the output so far of each attempt held whose output changed
        since its last write and whose last write is ``output_every_s`` old at least; returns how
        many the store took (only while this worker holds the run's lease)."""
        now = self._monotonic()
        due = outputs_due(self._attempts.values(), now, LIVE_OUTPUT_MOST)
        if not due:
            return 0
        for held, _ in due:
            held.output_due = now + self.output_every_s
        outputs = [LiveOutput(held.run.id, held.run.attempts, text) for held, text in due]
        written = await self.store.write_outputs(outputs, self.node, self.clock.now())
        for held, text in due:
            if held.run.id in written:
                held.written = text
        return len(written)

    # -- one trigger --------------------------------------------------------------------------

    async def handle(self, delivery: Delivery) -> Run | None:
        """Claim and attempt the triggered run; returns the run as recorded afterwards, or None
        when there was nothing to do (already taken, finished, or not due yet)."""
        started = await self.claim([delivery])
        return await self.attempt(*started[0]) if started else None

    async def claim(self, deliveries: Sequence[Delivery]) -> list[tuple[Run, Job | None]]:
        """Claim the triggered runs in one store call, then acknowledge the triggers: from there
        on each run's lease, not the queue's visibility timeout, covers a crash (the sweep retries
        an expired lease), so an attempt longer than the visibility timeout is never handed out
        again meanwhile. Returns the claimed runs with their jobs (None: the job was deleted)."""
        now = self.clock.now()
        triggers = [delivery.trigger for delivery in deliveries]
        run_ids = [trigger.run_id for trigger in triggers]
        claimed = await self.store.claim_runs_with_jobs(run_ids, self.node, now, now + self.lease)
        unclaimed = [trigger for trigger in triggers if trigger.run_id not in claimed]
        if unclaimed:
            await self._not_claimable(unclaimed, now)
        for queue_name in dict.fromkeys(trigger.queue for trigger in triggers):
            await self.queue.ack(queue_name, [d for d in deliveries if d.trigger.queue == queue_name])
        started = [claimed[run_id] for run_id in dict.fromkeys(run_ids) if run_id in claimed]
        if self.tracer.enabled and started:
            spans.claim(self.tracer, [run for run, _ in started], now, self.clock.now(), len(triggers))
        return started  # a trigger delivered twice: one attempt

    async def attempt(
        self, run: Run, job: Job | None, *, attempted: Callable[[], None] = _nothing
    ) -> Run | None:
        """Attempt a claimed run and record the outcome; returns the run as recorded.
        ``attempted`` is called once the executor has returned, before the outcome is recorded.
        With tracing on, the attempt is a span of the run's trace, ended once the outcome is
        recorded."""
        if not self.tracer.enabled:
            return await self._attempt_and_finish(run, job, NO_SPAN, attempted)
        span = spans.attempt(self.tracer, run, job, self.clock.now())
        with ending(span, self.clock):
            return await self._attempt_and_finish(run, job, span, attempted)

    async def _attempt_and_finish(
        self, run: Run, job: Job | None, span: Span, attempted: Callable[[], None]
    ) -> Run | None:
        if job is None:
            return await self._cancel(run, "the job was deleted", span)
        if run.cancel_requested:  # replaced (overlap=replace) before it started
            return await self._cancel(run, "cancelled before it started", span)
        if run.attempts == 1 and run.kind is RunKind.SCHEDULED and run.started_at is not None:
            metrics.START_LATENESS.observe((run.started_at - run.due).total_seconds())
        result = await self._attempt(job, run, span)
        attempted()
        return await self._finish(run, job, result, span)

    async def _cancel(self, run: Run, reason: str, span: Span) -> Run | None:
        return await self._finish(run, None, AttemptResult(Outcome.CANCELLED, error=reason), span)

    async def _not_claimable(self, triggers: Sequence[Trigger], now: datetime) -> None:
        """A trigger that came early (for a retry, or before its slot: a clock behind the
        publisher's) is put back until its time; others (the run is gone, taken or finished) are
        dropped. One store read for all the triggers of a receive that could not be claimed."""
        found = await self.store.get_runs([trigger.run_id for trigger in triggers])
        for trigger in triggers:
            run = found.get(trigger.run_id)
            if run is None or run.state not in (RunState.PENDING, RunState.RETRYING):
                continue
            due = max(run.due, run.next_attempt_at or run.due)  # due: the slot, or its jittered time
            if due > now:
                await self.queue.publish_at(trigger, due)

    async def _attempt(self, job: Job, run: Run, span: Span) -> AttemptResult:
        """The attempt itself, in the task that handles the run (no task of its own): a stop
        by its lease keeper or a cancellation request cancels that task while it waits in the
        executor, and the attempt ends with the stop's result."""
        live = OutputSoFar()
        ctx = AttemptContext.for_run(
            job, run, run.attempts, deadline=None, trace_headers=span.headers(), live=live
        )
        if log.isEnabledFor(logging.DEBUG):  # the finish line says the rest, at INFO
            log.debug(
                "attempt started",
                extra={
                    "action": "start",
                    "job_id": job.id,
                    "run_id": run.id,
                    "attempt": run.attempts,
                    "node": self.node,
                },
            )
        task = asyncio.current_task()
        assert task is not None
        held = self._hold(run, task, live)
        try:
            return await self.executors.execute(job.target, ctx)
        except asyncio.CancelledError:
            if held.stopped is not None:  # stopped by its lease keeper or a cancellation request
                task.uncancel()
                return held.stopped
            raise
        finally:
            self._unhold(run.id)

    # -- leases of the attempts held ----------------------------------------------------------

    def _hold(self, run: Run, work: asyncio.Task[Any], live: OutputSoFar | None = None) -> _Held:
        """Register a running attempt; its lease is extended by the worker's one keeper task."""
        now = self._monotonic()
        held = _Held(run, work, now, now + self.lease.total_seconds() / 3, live or OutputSoFar())
        self._attempts[run.id] = held
        if self._keeper is None or self._keeper.done():
            self._keeper = asyncio.create_task(self._keep_leases(), name=f"worker-leases-{self.node}")
        return held

    def _unhold(self, run_id: str) -> None:
        held = self._attempts.pop(run_id, None)
        if held is not None:
            held.over = True  # its task goes on to record the outcome: a late stop must not cancel it
        if not self._attempts and self._keeper is not None:
            self._keeper.cancel()  # nothing left to keep: the next attempt starts a new keeper
            self._keeper = None

    async def _keep_leases(self) -> None:
        """Extend each held attempt's lease every third of it, and stop the attempt if the lease
        is lost or cancellation was requested: one task for all of a worker's attempts (not a
        task and a timer per attempt), asleep until the earliest lease needs its heartbeat."""
        interval = self.lease.total_seconds() / 3
        while self._attempts:
            earliest = min(held.beat_at for held in self._attempts.values())
            await asyncio.sleep(max(0.0, earliest - self._monotonic()))
            for held in [h for h in self._attempts.values() if h.beat_at <= self._monotonic()]:
                held.beat_at = self._monotonic() + interval
                await self._heartbeat(held)

    async def _heartbeat(self, held: _Held) -> None:
        run = held.run
        try:
            current = await self.store.heartbeat(
                run.id, run.attempts, self.node, self.clock.now() + self.lease
            )
        except TransientError:  # the store is down: the next beat may reach it before the lease ends
            return
        if current is None:
            held.stop(AttemptResult(Outcome.CANCELLED, error="lease lost"))
        elif current.cancel_requested:
            held.stop(AttemptResult(Outcome.CANCELLED, error="cancelled"))

    async def _finish(self, run: Run, job: Job | None, result: AttemptResult, span: Span) -> Run | None:
        now = self.clock.now()
        next_at: datetime | None = None
        tries = run.attempts - run.lost_attempts  # crashes of workers do not count against the target
        if job is not None and should_retry(job.retry, tries, result.outcome, result.final):
            delay = retry_delay(job.retry, tries, self.rng.random(), result.retry_after_s)
            next_at = now + timedelta(seconds=delay)
        recorded = await self.finisher.record(Finish(run.id, run.attempts, result, next_at))
        if span is not NO_SPAN:
            spans.attempted(span, result, recorded)
        metrics.ATTEMPTS.labels(result.outcome.value).inc()
        _count_run(run, job, recorded)
        if recorded is not None and recorded.state is RunState.RETRYING and next_at is not None:
            await self.queue.publish_at(Trigger(run.id, run.job_id, run.queue), next_at)
        log.info(
            "attempt finished",
            extra={
                "action": "finish",
                "job_id": run.job_id,
                "run_id": run.id,
                "attempt": run.attempts,
                "outcome": result.outcome.value,
                "state": None if recorded is None else recorded.state.value,
                "node": self.node,
                "trace_id": trace_id(run.traceparent),
            },
        )
        return recorded


class _Slot:
    """One claimed run's slot of a worker's ``concurrency``: given back once, early (the
    executor returned, and fewer than ``concurrency`` outcomes wait to be recorded) or when the
    run's task ends."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.held = True
        self.recording = False  # counted in the worker's outcomes waiting to be recorded

    def early(self) -> None:
        worker = self.worker
        if self.held and worker._recording < worker.concurrency:
            self.held, self.recording = False, True
            worker._recording += 1
            worker._release(1)

    def done(self) -> None:
        if self.recording:
            self.worker._recording -= 1
        if self.held:
            self.held = False
            self.worker._release(1)


CANCELLED_BY_REQUEST = AttemptResult(
    Outcome.CANCELLED, error="cancelled (replaced by a newer run, or its job was deleted)"
)


@dataclass(slots=True)
class _Held:
    """An attempt this worker is running: its run, its work, when it started and when its lease
    is next extended, and why it was stopped (None: it was not)."""

    run: Run
    work: asyncio.Task[Any]  # the task waiting for the attempt's executor
    since: float  # loop time it started
    beat_at: float  # loop time
    live: OutputSoFar  # the executor's output so far
    stopped: AttemptResult | None = None
    over: bool = False  # the executor returned: nothing left to stop
    written: str | None = None  # the output so far as last written to the store
    output_due: float = 0.0  # loop time before which its output so far is not written again

    def stop(self, reason: AttemptResult) -> None:
        if self.stopped is None and not self.over:
            self.stopped = reason
            self.work.cancel()


def outputs_due(held: Iterable[_Held], now: float, most: int) -> list[tuple[_Held, str]]:
    """The attempts of ``held`` whose output so far is to be written at loop time ``now`` (their
    last write ``output_every_s`` old at least, and their output changed since), each with its
    output so far (the last ``most`` characters, redacted, storable)."""
    due: list[tuple[_Held, str]] = []
    for one in held:
        if one.over or now < one.output_due:
            continue
        text = storable_text(one.live.text(most))
        if text is not None and text != one.written:
            due.append((one, text))
    return due


def _count_reclaims(queue: str, deliveries: Sequence[Delivery]) -> None:
    again = sum(1 for delivery in deliveries if delivery.deliveries > 1)
    if again:
        metrics.QUEUE_RECLAIMS.labels(queue).inc(again)


def _count_run(run: Run, job: Job | None, recorded: Run | None) -> None:
    """Runs finished by state, team and queue; retries scheduled by team and queue."""
    if recorded is None:
        return
    team = metrics.team_label(None if job is None else job.team)
    if recorded.state is RunState.RETRYING:
        metrics.RETRIES.labels(team, run.queue).inc()
    elif recorded.state.terminal:
        metrics.RUNS_FINISHED.labels(recorded.state.value, team, run.queue).inc()
