"""The lease session of the etcd coordinator, as a pure state machine.

:func:`next_step` takes the session as it stands (:class:`Session`, a frozen record), the
monotonic time ``now`` and what just happened (an event: a heartbeat is due, etcd answered a
grant or a keepalive, the lease turned out to be gone, a shard was acquired ...) and returns the
next session and what to do (actions: join, renew, wait, notify ...). It reads no clock and does
no I/O, so every rule below is tested with a manual clock and no etcd
(``tests/coordinator/test_session.py``); :class:`cronwheel.coordinator.etcd.EtcdCoordinator` is
the shell that feeds it events and carries out its actions.

The rules (see :mod:`cronwheel.coordinator.etcd` for why they are safe):

* **Local deadline.** Shards are claimed only until ``send time of the last successful grant or
  keepalive + ttl - margin`` (:attr:`Session.valid_until`): etcd expires the lease no earlier
  than ``ttl`` after it *received* that request. After the deadline :meth:`Session.owned` is
  empty, whether or not the shell noticed (the :class:`Lapsed` event only logs and notifies).
* **Heartbeats** go out every ``ttl/3`` (:class:`Wait` until then, after each answer).
* **Step-down.** A :class:`Beat` that says the node is unhealthy renews nothing: the lease lapses
  and the others take the shards. The first unhealthy beat notes the view's revision.
* **Sit-out.** A node whose lease is gone and that was unhealthy less than ``hold`` ago does not
  join again while other schedulers that were members before its trouble began still are.
* **Lost lease.** A lease etcd no longer knows (keepalive TTL 0, LEASE_NOT_FOUND) drops every
  shard; the node joins again at once but acquires nothing for one TTL
  (:meth:`Session.may_acquire`), and reads every key again (etcd may have lost its data).
* **Held shards** (shard -> epoch) belong to the current lease: results that arrive for an older
  lease are ignored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from cronwheel.coordinator.plan import Plan
from cronwheel.coordinator.port import ShardLease

NEVER = -math.inf


def default_safety_margin(ttl_s: float) -> float:
    return min(max(1.0, ttl_s / 5), ttl_s / 2)


@dataclass(frozen=True, slots=True)
class Terms:
    """The fixed parameters of a session."""

    ttl_s: float  # the lease TTL, and the heartbeat period's base
    margin_s: float  # stop claiming this long before etcd could expire the lease
    hold_s: float  # after a step-down, sit out this long while others serve

    @property
    def beat_s(self) -> float:
        return self.ttl_s / 3


@dataclass(frozen=True, slots=True)
class Session:
    terms: Terms
    lease: int = 0  # 0: none (not joined yet, lost, or stopped)
    renewed_at: float = NEVER  # send time of the last successful grant or keepalive of ``lease``
    held: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))  # shard -> epoch
    acquire_after: float = NEVER  # no acquisitions before (one TTL after a lost lease)
    unhealthy_at: float = NEVER  # when the health check last said no
    trouble_revision: int | None = None  # the view's revision when it first said no
    sitting_out: bool = False
    reachable: bool = True  # False after a failed call, until the next success

    @property
    def valid_until(self) -> float:
        """The local deadline: no shard is claimed from then on."""
        if not self.lease:
            return NEVER
        return self.renewed_at + self.terms.ttl_s - self.terms.margin_s

    def claims(self, now: float) -> bool:
        return now < self.valid_until

    def owned(self, now: float) -> dict[int, ShardLease]:
        if not self.claims(now):
            return {}
        until = self.valid_until
        return {shard: ShardLease(shard, epoch, until) for shard, epoch in self.held.items()}

    def may_acquire(self, now: float) -> bool:
        return self.acquire_after <= now < self.valid_until


# -- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Beat:
    """Time for the next heartbeat. ``schedulers``: the other scheduler members in the view,
    with the revision their member key was created at; ``revision``: the view's revision."""

    healthy: bool
    revision: int = 0
    schedulers: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Joined:
    """etcd granted ``lease`` (asked for at ``sent``) and the member key is written on it."""

    lease: int
    sent: float


@dataclass(frozen=True, slots=True)
class Renewed:
    """etcd answered the keepalive of ``lease`` sent at ``sent``: the lease's TTL, 0 if gone."""

    lease: int
    sent: float
    ttl: int


@dataclass(frozen=True, slots=True)
class Unreachable:
    """A join or renewal did not get through (etcd unreachable, no leader, timed out)."""


@dataclass(frozen=True, slots=True)
class LeaseGone:
    """etcd no longer knows ``lease`` (it expired, was revoked, or etcd lost its data)."""

    lease: int
    reason: str


@dataclass(frozen=True, slots=True)
class Lapsed:
    """The local-deadline timer fired."""


@dataclass(frozen=True, slots=True)
class Settled:
    """The local half of a reconcile plan made under ``lease``: forget what it releases and
    drops, adopt what it adopts (before anything is deleted in etcd)."""

    lease: int
    plan: Plan


@dataclass(frozen=True, slots=True)
class Acquired:
    """The shard key of ``shard`` was created on ``lease`` at revision ``epoch``."""

    lease: int
    shard: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Stopped:
    """The node leaves: nothing is claimed any more."""


SessionEvent = Beat | Joined | Renewed | Unreachable | LeaseGone | Lapsed | Settled | Acquired | Stopped


# -- actions --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Join:
    """Grant a lease and write the member key on it; answer :class:`Joined` or :class:`Unreachable`."""


@dataclass(frozen=True, slots=True)
class Renew:
    """Send a keepalive for ``lease``; answer :class:`Renewed` or :class:`Unreachable`."""

    lease: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Beat again at ``until``, or as soon as the lease is found lost."""

    until: float


@dataclass(frozen=True, slots=True)
class RetryLater:
    """Beat again after the retry policy's next delay."""


@dataclass(frozen=True, slots=True)
class ArmDeadline:
    """Send :class:`Lapsed` at ``at`` (replacing the timer armed before)."""

    at: float


@dataclass(frozen=True, slots=True)
class Notify:
    """What this node claims may have changed: wake ``wait_for_change``."""


@dataclass(frozen=True, slots=True)
class Reconcile:
    """Run the reconcile task at ``at`` (now, or when the acquire window opens)."""

    at: float


@dataclass(frozen=True, slots=True)
class WakeSession:
    """Interrupt the session's :class:`Wait`: the lease is gone, join again now."""


@dataclass(frozen=True, slots=True)
class Resync:
    """Forget the local copy of the keys and read every key again (etcd may have lost its data)."""


@dataclass(frozen=True, slots=True)
class RestartWatch:
    """Open a new watch: after an outage the old stream may hang on a dead connection."""


@dataclass(frozen=True, slots=True)
class Say:
    """Log a fact (the shell adds ``node``)."""

    level: int
    message: str
    action: str
    fields: Mapping[str, object] = field(default_factory=dict)


Action = (
    Join
    | Renew
    | Wait
    | RetryLater
    | ArmDeadline
    | Notify
    | Reconcile
    | WakeSession
    | Resync
    | RestartWatch
    | Say
)
PACING = (Join, Renew, Wait, RetryLater)  # what the session task does next; one per Beat or answer
Step = tuple[Session, tuple[Action, ...]]


def next_step(state: Session, now: float, event: SessionEvent) -> Step:  # noqa: PLR0911 - a case each
    """The session after ``event`` at ``now``, and what to do about it."""
    match event:
        case Beat():
            return _beat(state, now, event)
        case Joined():
            return _joined(state, now, event)
        case Renewed():
            return _renewed(state, now, event)
        case Unreachable():
            return replace(state, reachable=False), (RetryLater(),)
        case LeaseGone():
            return _lease_gone(state, now, event)
        case Lapsed():
            return _lapsed(state, now)
        case Settled():
            return _settled(state, event)
        case Acquired():
            return _acquired(state, event)
        case Stopped():
            return replace(state, lease=0, renewed_at=NEVER, held=_frozen({})), (Notify(),)


def _beat(state: Session, now: float, beat: Beat) -> Step:
    terms = state.terms
    if not beat.healthy:
        says: tuple[Action, ...] = ()
        if state.claims(now):
            says = (
                Say(
                    logging.WARNING,
                    "unhealthy: not renewing the lease, so that other nodes take the shards",
                    "step_down",
                    {"shards": len(state.held)},
                ),
            )
        trouble = beat.revision if state.trouble_revision is None else state.trouble_revision
        return replace(state, unhealthy_at=now, trouble_revision=trouble), (*says, Wait(now + terms.beat_s))
    if not state.lease and now < state.unhealthy_at + terms.hold_s:
        since = state.trouble_revision or 0
        others = sorted(node for node, created in beat.schedulers.items() if created <= since)
        if others:
            says = () if state.sitting_out else (_sit_out(terms, len(others)),)
            return replace(state, sitting_out=True), (*says, Wait(now + terms.beat_s))
    state = replace(state, sitting_out=False)
    return state, (Renew(state.lease) if state.lease else Join(),)


def _sit_out(terms: Terms, others: int) -> Say:
    return Say(
        logging.INFO,
        "sitting out before rejoining: other schedulers serve meanwhile",
        "sit_out",
        {"hold_s": terms.hold_s, "others": others},
    )


def _joined(state: Session, now: float, joined: Joined) -> Step:
    state, back = _back(state)
    state = replace(
        state, lease=joined.lease, renewed_at=joined.sent, held=_frozen({}), trouble_revision=None
    )
    return state, (
        *back,
        ArmDeadline(state.valid_until),
        Reconcile(now),
        Notify(),
        Say(logging.INFO, "joined the cluster", "join", {"lease": f"{joined.lease:x}"}),
        Wait(now + state.terms.beat_s),
    )


def _renewed(state: Session, now: float, renewed: Renewed) -> Step:
    state, back = _back(state)
    if renewed.lease != state.lease:  # lost (and maybe joined again) while the keepalive flew
        return state, (*back, _pace(state, now))
    if renewed.ttl <= 0:
        state, actions = _lease_gone(state, now, LeaseGone(renewed.lease, "the lease expired"))
        return state, (*back, *actions, _pace(state, now))
    lapsed = not state.claims(now)
    state = replace(state, renewed_at=max(state.renewed_at, renewed.sent), trouble_revision=None)
    again: tuple[Action, ...] = ()
    if lapsed and state.held and state.claims(now):
        again = (Say(logging.INFO, "lease renewed again", "renew"), Notify())
    return state, (*back, ArmDeadline(state.valid_until), *again, _pace(state, now))


def _back(state: Session) -> tuple[Session, tuple[Action, ...]]:
    """A call got through after failures: say so, and open a fresh watch."""
    if state.reachable:
        return state, ()
    say = Say(logging.INFO, "etcd reachable again", "reconnect", {"backend": "etcd"})
    return replace(state, reachable=True), (say, RestartWatch())


def _pace(state: Session, now: float) -> Wait:
    """Next heartbeat in ``ttl/3`` while there is a lease; at once (to join again) without one."""
    return Wait(now + state.terms.beat_s if state.lease else now)


def _lease_gone(state: Session, now: float, gone: LeaseGone) -> Step:
    if not state.lease or gone.lease != state.lease:
        return state, ()
    say = Say(
        logging.WARNING,
        "lost the lease: dropping every shard and joining again",
        "lapse",
        {"reason": gone.reason, "shards": len(state.held)},
    )
    # If etcd lost its data, other nodes may still claim shards under leases that no longer
    # exist, until their local deadlines (at most a TTL from now): acquire nothing before.
    window = now + state.terms.ttl_s
    state = replace(state, lease=0, renewed_at=NEVER, held=_frozen({}), acquire_after=window)
    return state, (say, Notify(), WakeSession(), Resync(), Reconcile(window))


def _lapsed(state: Session, now: float) -> Step:
    if state.lease and state.claims(now):  # the timer fired early, or a renewal re-armed it
        return state, (ArmDeadline(state.valid_until),)
    says: tuple[Action, ...] = ()
    if state.held:
        says = (
            Say(
                logging.WARNING,
                "lease not renewed in time: not claiming shards",
                "lapse",
                {"shards": len(state.held)},
            ),
        )
    return state, (*says, Notify())


def _settled(state: Session, settled: Settled) -> Step:
    if not state.lease or settled.lease != state.lease:
        return state, ()
    plan = settled.plan
    held = {shard: epoch for shard, epoch in state.held.items() if shard not in plan.release}
    for shard in plan.drop:
        held.pop(shard, None)
    held.update(plan.adopt)
    if held == state.held:
        return state, ()
    return replace(state, held=_frozen(held)), (Notify(),)


def _acquired(state: Session, acquired: Acquired) -> Step:
    if not state.lease or acquired.lease != state.lease:
        return state, ()
    held = {**state.held, acquired.shard: acquired.epoch}
    return replace(state, held=_frozen(held)), (Notify(),)


def _frozen(held: dict[int, int]) -> Mapping[int, int]:
    return MappingProxyType(held)
