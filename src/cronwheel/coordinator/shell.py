"""What the coordinators' lease shells share, whatever holds the leases (etcd keys or PostgreSQL
rows): :class:`LeaseShell`, which carries out what the pure lease session
(:func:`cronwheel.coordinator.session.next_step`) decides, the error that stops a shell, its retry
policy and how it waits for an event."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import ClassVar

from cronwheel.clock import Clock, monotonic_of
from cronwheel.coordinator.plan import LEADER, WATCHDOG, Plan
from cronwheel.coordinator.port import ShardLease
from cronwheel.coordinator.session import (
    PACING,
    Action,
    ArmDeadline,
    Beat,
    Join,
    Lapsed,
    Notify,
    Reconcile,
    Renew,
    RestartWatch,
    Resync,
    RetryLater,
    Say,
    Session,
    SessionEvent,
    Settled,
    Stopped,
    Terms,
    Unreachable,
    Wait,
    WakeSession,
    default_safety_margin,
    next_step,
)
from cronwheel.errors import InvalidInputError, PermanentError
from cronwheel.retrying import Backoff, Retries
from cronwheel.telemetry import metrics


class CoordinatorFailedError(PermanentError):
    """The coordinator stopped on an error that retrying cannot fix (see :class:`LeaseShell`)."""


def retry_policy(cap_s: float) -> Backoff:
    """0.1 s, 0.2 s, 0.4 s ... up to ``cap_s``, jittered so that nodes do not retry in step."""
    return Backoff(first_s=0.1, multiplier=2.0, cap_s=cap_s, jitter=0.25)


def always() -> bool:
    return True


async def wait_for(event: asyncio.Event, timeout_s: float) -> None:
    """Until ``event`` is set or ``timeout_s`` passed. (Not ``asyncio.wait_for``: on Python 3.11
    it can swallow a cancellation that arrives as the event fires, and ``stop()`` would hang.)"""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()


def lease_terms(ttl_s: float, safety_margin_s: float | None, hold_s: float | None) -> Terms:
    """The session's terms for leases of ``ttl_s``: the safety margin
    (:func:`~cronwheel.coordinator.session.default_safety_margin` unless given) and how long to
    stay out after a step-down while others serve (5 TTLs unless given)."""
    margin = default_safety_margin(ttl_s) if safety_margin_s is None else safety_margin_s
    if not 0 <= margin < ttl_s:
        raise InvalidInputError("the lease safety margin must be at least 0 and less than the TTL")
    return Terms(ttl_s, margin, 5 * ttl_s if hold_s is None else hold_s)


class LeaseShell(abc.ABC):
    """The lease session of a cluster coordinator, carried out: the half of
    :class:`~cronwheel.coordinator.port.Coordinator` that does not depend on what holds the leases.

    **Decisions are pure, the tasks are thin.** The session (grant, renew, local deadline,
    step-down, sit-out, lost lease, the shards held under the lease) is the state machine
    :func:`~cronwheel.coordinator.session.next_step`; it reads no clock: the shell passes it the
    monotonic time of the injected clock (:func:`cronwheel.clock.monotonic_of`) and carries out
    what it returns. Every state change is one synchronous :meth:`_step`, so the tasks never see a
    half-updated session. The *session* task makes the calls the state machine asks for (join,
    renew, the waits between them); the backend adds the tasks that read the cluster and
    reconcile, each started with :meth:`_spawn`.

    **Failures.** Each task waits out transient errors (the backend unreachable, no leader) with
    :func:`retry_policy`. Any other error (refused credentials or permissions, a bug) stops the
    coordinator (:meth:`_failed`): it stops renewing, and ``owned_shards()``, ``leader()``,
    ``members()`` and ``wait_for_change()`` raise :class:`CoordinatorFailedError`, which stops a
    scheduler process as the supervision rule says, instead of a node that keeps a lease it
    cannot serve.

    **Hooks.** A backend names itself (``_log``, ``_backend``, ``_title``, ``_task_prefix``) and
    implements the calls: :meth:`_join`, :meth:`_renew`, :meth:`_campaign`, :meth:`_resign`,
    :meth:`_holder`; what the session sees: :meth:`_beat`; what it asks for: :meth:`_resync`,
    :meth:`_restart_watch`. Its ``start()`` and ``stop()`` join and leave, :meth:`_spawn` and
    :meth:`_halt` the tasks; its reconcile task begins each plan with :meth:`_settle`."""

    _log: ClassVar[logging.Logger]  # the backend's logger
    _backend: ClassVar[str]  # the ``backend`` field of its log lines
    _title: ClassVar[str]  # its name in messages: "etcd unreachable", "the etcd coordinator"
    _task_prefix: ClassVar[str]  # its tasks are named "{prefix}-coordinator-{node}-{task}"

    def __init__(
        self,
        node: str,
        roles: tuple[str, ...],
        clock: Clock,
        terms: Terms,
        shards: int,
        metrics_url: str | None,
    ) -> None:
        self.node = node
        self.roles = roles
        self.metrics_url = metrics_url  # shown by `cluster status`
        self._clock = clock
        self._monotonic = monotonic_of(clock)
        self._shards = shards
        self._session = Session(terms)  # replaced whole by every step, never changed in place
        self._healthy: Callable[[], bool] = always  # heartbeat only while this node can do its work
        self._may_watch: Callable[[], bool] = always  # hold the watchdog duty only while it can do it
        self._since: datetime | None = None
        self._changed = asyncio.Event()  # for wait_for_change
        self._dirty = asyncio.Event()  # for the reconcile task
        self._wake = asyncio.Event()  # interrupts the session task's wait: the lease is gone
        self._deadline: asyncio.TimerHandle | None = None  # sends Lapsed at the local deadline
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._failure: BaseException | None = None

    @property
    def ttl_s(self) -> float:
        return self._session.terms.ttl_s

    @property
    def safety_margin_s(self) -> float:
        return self._session.terms.margin_s

    @property
    def session(self) -> Session:
        """The lease session as it stands (a frozen record)."""
        return self._session

    # -- the port's calls that only read the session

    def owned_shards(self) -> dict[int, ShardLease]:
        self._check()
        return self._session.owned(self._monotonic.monotonic())

    async def leader(self) -> str | None:
        """The leader as the backend has it; while the backend cannot be reached, the leader this
        node last saw, and this node itself only while its own lease is still locally valid."""
        self._check()
        return await self._holder(LEADER)

    async def watchdog(self) -> str | None:
        """The holder of the watchdog duty, read as :meth:`leader` is."""
        self._check()
        return await self._holder(WATCHDOG)

    async def wait_for_change(self, timeout_s: float) -> None:
        """Returns when something changed since the previous return (at once if it already
        did), or after ``timeout_s``."""
        await wait_for(self._changed, timeout_s)
        self._changed.clear()
        self._check()

    def set_health_check(self, healthy: Callable[[], bool]) -> None:
        """Heartbeat only while ``healthy()``: a node that cannot do its work (its store hangs or
        is unreachable) lets its lease lapse so that others take its shards within the TTL, and
        joins again, with a new lease, once ``healthy()`` is true again. If its lease did lapse
        and other schedulers are serving, it waits ``hold_s`` after the last unhealthy answer
        first: a node on a slow or flapping link would otherwise take its shards back the moment
        one call is quick, stall on them again, and make their slots late once per flap. When no
        other scheduler has served throughout (everyone's store was down), it joins at once."""
        self._healthy = healthy

    def set_watchdog_check(self, able: Callable[[], bool]) -> None:
        """Campaign for the watchdog duty, and keep it, only while ``able()``: a holder whose
        notifier cannot reach the store gives the duty up (at its next reconcile, within TTL/2),
        so that a member that can takes it over."""
        self._may_watch = able

    def _seen_holder(self, holder: str | None, lease: int) -> str | None:
        """The holder of a duty as last seen, holding it on ``lease``, for when the backend cannot
        be reached: this node itself only while that is its lease and still locally valid."""
        session = self._session
        mine = lease == session.lease and session.claims(self._monotonic.monotonic())
        return None if holder == self.node and not mine else holder

    def _check(self) -> None:
        if self._failure is not None:
            raise CoordinatorFailedError(f"the {self._title} coordinator stopped: {self._failure!r}")

    # -- the hooks each backend implements

    @abc.abstractmethod
    async def _holder(self, duty: str) -> str | None:
        """Who holds ``duty`` (:data:`~cronwheel.coordinator.plan.LEADER` or
        :data:`~cronwheel.coordinator.plan.WATCHDOG`) as the backend has it, or, while it cannot
        be reached, as last seen (:meth:`_seen_holder`)."""

    @abc.abstractmethod
    async def _campaign(self, lease: int, duty: str) -> bool:
        """Take ``duty`` on ``lease`` if nobody holds it; whether this node now does."""

    @abc.abstractmethod
    async def _resign(self, lease: int, duty: str) -> bool:
        """Give ``duty`` up if it is still held on ``lease``; whether it was."""

    @abc.abstractmethod
    async def _join(self) -> SessionEvent:
        """Take a new lease and write this node's membership on it: ``Joined``, or
        ``Unreachable`` when the lease was gone before the membership was written. Raises what
        the backend raises (a transient error is retried by the session task)."""

    @abc.abstractmethod
    async def _renew(self, lease: int) -> SessionEvent:
        """Renew ``lease`` (and everything held on it): ``Renewed``, with a TTL of 0 when the
        backend no longer knows the lease. The send time it reports is taken before the call."""

    @abc.abstractmethod
    def _beat(self, healthy: bool) -> Beat:
        """The heartbeat as the session sees it: ``healthy``, and what this node last saw of the
        cluster (the view's revision, the other schedulers and when they joined)."""

    @abc.abstractmethod
    def _resync(self) -> None:
        """The backend may have lost its data: read everything again, forgetting the local copy."""

    @abc.abstractmethod
    def _restart_watch(self) -> None:
        """After an outage: follow the cluster's changes anew (the old stream may hang on a dead
        connection)."""

    # -- the session: carrying out what next_step decides

    def _step(self, event: SessionEvent) -> Action | None:
        """Feed ``event`` to the session; do its side effects now and return what the session
        task does next (join, renew, wait), if the event was one of its answers."""
        now = self._monotonic.monotonic()
        self._session, actions = next_step(self._session, now, event)
        pace = None
        for action in actions:
            if isinstance(action, PACING):
                pace = action
            else:
                self._do(action, now)
        return pace

    def _do(self, action: Action, now: float) -> None:
        match action:
            case ArmDeadline(at=at):
                if self._deadline is not None:
                    self._deadline.cancel()
                loop = asyncio.get_running_loop()
                self._deadline = loop.call_later(max(0.0, at - now), self._step, Lapsed())
            case Notify():
                self._changed.set()
            case Reconcile(at=at):
                self._later(at - now, self._dirty.set)
            case WakeSession():
                self._wake.set()
            case Resync():
                self._resync()
            case RestartWatch():
                self._restart_watch()
            case Say(level=level, message=message, action=name, fields=fields):
                self._log.log(level, message, extra={"action": name, "node": self.node, **fields})
                if name == "lapse":  # the lease was lost, or not renewed in time
                    metrics.LEASES_LOST.inc()

    def _later(self, delay_s: float, callback: Callable[[], None]) -> None:
        """Call ``callback`` after ``delay_s``, at once (no timer) when that time has come."""
        if delay_s <= 0:
            callback()
            return
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            callback()

        handle = asyncio.get_running_loop().call_later(delay_s, fire)
        self._timers.add(handle)

    def _cancel_timers(self) -> None:
        for handle in (self._deadline, *self._timers):
            if handle is not None:
                handle.cancel()
        self._deadline = None
        self._timers.clear()

    async def _session_loop(self, pace: Action | None) -> None:
        policy = retry_policy(self.ttl_s / 3)
        retries = policy.tracker()
        while True:
            await self._pause(pace, retries)
            pace = self._step(self._beat(self._healthy()))
            if isinstance(pace, Join | Renew):
                pace = await self._call(pace, policy, retries)

    async def _pause(self, pace: Action | None, retries: Retries) -> None:
        """Wait as the session said: until its time (cut short when the lease is found lost), or
        the retry policy's next delay after a failed call."""
        if isinstance(pace, RetryLater):
            await asyncio.sleep(retries.failed())
        elif isinstance(pace, Wait):
            await wait_for(self._wake, pace.until - self._monotonic.monotonic())
        self._wake.clear()  # whatever woke it is what the next beat decides on

    async def _call(self, action: Join | Renew, policy: Backoff, retries: Retries) -> Action | None:
        """Carry out a join or renewal; the session's answer to how it went. An outage is logged
        at its first failed call and every 50th after it."""
        try:
            event = await (self._join() if isinstance(action, Join) else self._renew(action.lease))
        except Exception as error:
            if not policy.retries(error):
                raise
            if retries.failures % 50 == 0:
                self._log.warning(
                    f"{self._title} unreachable, retrying with backoff",
                    extra={
                        "action": "wait",
                        "backend": self._backend,
                        "node": self.node,
                        "attempt": retries.failures + 1,
                        "error": str(error),
                    },
                )
            event = Unreachable()
        else:
            retries.succeeded()
        return self._step(event)

    # -- reconcile

    async def _settle(self, lease: int, plan: Plan) -> None:
        """The first part of carrying out ``plan``: its local half (stop claiming what it gives
        up, before the backend hears of it), then the duties: campaign for the leader and the
        watchdog duty, give the watchdog duty up. The backend does the rest (assignment,
        shards)."""
        self._step(Settled(lease, plan))
        if plan.campaign and await self._campaign(lease, LEADER):
            metrics.LEADER_ELECTIONS.inc()
            self._log.info("elected leader", extra={"action": "lead", "node": self.node})
        if plan.watch and await self._campaign(lease, WATCHDOG):
            self._log.info("took the watchdog duty", extra={"action": "watch", "node": self.node})
        if plan.resign and await self._resign(lease, WATCHDOG):
            self._log.warning(
                "gave the watchdog duty up: this node cannot do it now",
                extra={"action": "resign", "node": self.node, "duty": WATCHDOG},
            )

    # -- tasks

    def _spawn(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` as the named task. The coroutine is made inside the task: a task cancelled
        before its first step (a watch restarted during shutdown) leaves no coroutine un-awaited.
        A task that fails on an error of its own (not a cancellation) stops the coordinator."""

        async def run() -> None:
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._log.exception(
                    "coordinator task failed: the coordinator stops",
                    extra={"action": "fail", "node": self.node, "task": name},
                )
                self._failed(error)

        task_name = f"{self._task_prefix}-coordinator-{self.node}-{name}"
        self._tasks[name] = asyncio.create_task(run(), name=task_name)

    async def _halt(self, *others: asyncio.Task[None]) -> int:
        """Cancel the tasks (and ``others``), wait until they are done and stop the session; the
        lease it held (0: none), for the backend to give up."""
        tasks = [*self._tasks.values(), *others]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._cancel_timers()
        lease = self._session.lease
        self._step(Stopped())
        return lease

    def _failed(self, error: BaseException) -> None:
        """Stop claiming and renewing; the port's calls raise from now on."""
        self._failure = error
        for task in self._tasks.values():
            if task is not asyncio.current_task():
                task.cancel()
        self._cancel_timers()
        self._step(Stopped())
