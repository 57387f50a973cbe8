"""The lease session's rules (``cronwheel.coordinator.session.next_step``) on a manual clock:
grant, renewal, the local deadline, lapse, lost lease and the acquire window, step-down, sit-out,
outages, held shards. No etcd and no sleeping: etcd's side is played by the test."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pytest

from cronwheel.clock import ManualClock
from cronwheel.coordinator.plan import Plan
from cronwheel.coordinator.session import (
    NEVER,
    PACING,
    Acquired,
    Action,
    ArmDeadline,
    Beat,
    Join,
    Joined,
    Lapsed,
    LeaseGone,
    Notify,
    Reconcile,
    Renew,
    Renewed,
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

TTL, MARGIN, HOLD = 6.0, 1.2, 30.0
BEAT = TTL / 3
LEASE, OTHER_LEASE = 0xA1, 0xB2


@dataclass
class Node:
    """One node's session driven by hand: ``send`` feeds an event at the clock's time."""

    clock: ManualClock = field(default_factory=lambda: ManualClock(datetime(2026, 1, 1, tzinfo=UTC), 500.0))
    state: Session = field(default_factory=lambda: Session(Terms(TTL, MARGIN, HOLD)))
    said: list[Say] = field(default_factory=list)

    @property
    def now(self) -> float:
        return self.clock.monotonic()

    def send(self, event: SessionEvent) -> tuple[Action, ...]:
        self.state, actions = next_step(self.state, self.now, event)
        self.said += [action for action in actions if isinstance(action, Say)]
        return actions

    def join(self, lease: int = LEASE, took_s: float = 0.1) -> tuple[Action, ...]:
        """A beat that asks to join, and etcd granting ``lease`` ``took_s`` later."""
        assert self.send(Beat(healthy=True)) == (Join(),)
        sent = self.now
        self.clock.advance(took_s)
        return self.send(Joined(lease, sent))

    def renew(self, took_s: float = 0.1, ttl: int = int(TTL)) -> tuple[Action, ...]:
        lease = self.state.lease
        assert self.send(Beat(healthy=True)) == (Renew(lease),)
        sent = self.now
        self.clock.advance(took_s)
        return self.send(Renewed(lease, sent, ttl))

    def holding(self, *shards: int) -> None:
        for shard in shards:
            self.send(Acquired(self.state.lease, shard, 100 + shard))

    def actions(self, kind: type) -> list[str]:
        return [say.action for say in self.said if isinstance(say, kind)]


def pacing(actions: tuple[Action, ...]) -> Action:
    [pace] = [action for action in actions if isinstance(action, PACING)]
    return pace


def says(actions: tuple[Action, ...]) -> list[str]:
    return [action.action for action in actions if isinstance(action, Say)]


# -- joining and renewing ------------------------------------------------------------------------


def test_a_new_session_joins_and_claims_until_grant_send_time_plus_ttl_minus_margin() -> None:
    node = Node()
    assert node.state.owned(node.now) == {}
    sent = node.now
    actions = node.join(took_s=0.4)
    deadline = sent + TTL - MARGIN  # from when the grant was sent, not when it was answered
    assert node.state.lease == LEASE
    assert node.state.valid_until == deadline
    assert actions == (
        ArmDeadline(deadline),
        Reconcile(node.now),
        Notify(),
        Say(logging.INFO, "joined the cluster", "join", {"lease": "a1"}),
        Wait(node.now + BEAT),
    )
    assert node.state.may_acquire(node.now)  # a first join may acquire at once


def test_renewals_go_out_every_third_of_the_ttl_and_move_the_deadline_to_their_send_time() -> None:
    node = Node()
    node.join()
    node.clock.advance(BEAT)
    sent = node.now
    actions = node.renew(took_s=0.7)  # a slow answer: the deadline counts from the send
    assert node.state.renewed_at == sent
    assert actions == (ArmDeadline(sent + TTL - MARGIN), Wait(node.now + BEAT))


def test_held_shards_are_claimed_exactly_until_the_local_deadline() -> None:
    node = Node()
    node.join()
    node.holding(3, 7)
    deadline = node.state.valid_until
    owned = node.state.owned(deadline - 1e-6)
    assert {shard: (lease.epoch, lease.valid_until) for shard, lease in owned.items()} == {
        3: (103, deadline),
        7: (107, deadline),
    }
    assert node.state.owned(deadline) == {}
    assert not node.state.may_acquire(deadline)


@pytest.mark.parametrize(("ttl", "margin"), [(1.0, 0.5), (2.0, 1.0), (5.0, 1.0), (10.0, 2.0), (60.0, 12.0)])
def test_the_default_safety_margin_is_a_fifth_of_the_ttl_between_one_second_and_half(
    ttl: float, margin: float
) -> None:
    assert default_safety_margin(ttl) == margin


def test_a_renewal_answered_after_a_newer_one_does_not_move_the_deadline_back() -> None:
    node = Node()
    node.join()
    late_sent = node.now
    node.clock.advance(1.0)
    node.renew()
    newest = node.state.renewed_at
    node.send(Renewed(LEASE, late_sent, int(TTL)))
    assert node.state.renewed_at == newest


# -- the deadline passing ------------------------------------------------------------------------


def test_a_lapse_stops_every_claim_and_a_late_renewal_restores_them() -> None:
    node = Node()
    node.join()
    node.holding(1, 2)
    node.clock.advance(node.state.valid_until - node.now)  # no renewal got through meanwhile
    assert node.state.owned(node.now) == {}
    actions = node.send(Lapsed())
    assert says(actions) == ["lapse"]
    assert Notify() in actions
    actions = node.renew()  # etcd still had the lease (it keeps it a whole TTL)
    assert says(actions) == ["renew"]
    assert Notify() in actions
    assert set(node.state.owned(node.now)) == {1, 2}


def test_a_deadline_timer_that_fires_early_is_armed_again() -> None:
    node = Node()
    node.join()
    node.holding(1)
    node.clock.advance(node.state.valid_until - node.now - 0.001)
    assert node.send(Lapsed()) == (ArmDeadline(node.state.valid_until),)
    assert node.said[-1].action == "join"


def test_a_lapse_without_shards_only_notifies() -> None:
    node = Node()
    node.join()
    node.clock.advance(TTL)
    assert node.send(Lapsed()) == (Notify(),)


# -- a lost lease --------------------------------------------------------------------------------


def test_a_keepalive_answered_with_ttl_zero_drops_every_shard_and_joins_again_at_once() -> None:
    node = Node()
    node.join()
    node.holding(4, 5)
    node.clock.advance(BEAT)
    actions = node.renew(ttl=0)
    lost_at = node.now
    assert node.state.lease == 0
    assert node.state.held == {}
    assert node.state.owned(node.now) == {}
    assert says(actions) == ["lapse"]
    assert all(a in actions for a in (Notify(), WakeSession(), Resync(), Reconcile(lost_at + TTL)))
    assert pacing(actions) == Wait(lost_at)  # beat again now: join
    node.join(lease=OTHER_LEASE)
    assert node.state.lease == OTHER_LEASE


def test_after_a_lost_lease_nothing_is_acquired_for_one_ttl() -> None:
    node = Node()
    node.join()
    node.clock.advance(1.0)
    lost_at = node.now
    node.send(LeaseGone(LEASE, "etcd no longer knows the lease"))
    node.join(lease=OTHER_LEASE, took_s=0.2)
    assert node.state.claims(node.now)
    assert not node.state.may_acquire(node.now)
    node.clock.advance(lost_at + TTL - node.now - 0.001)
    node.renew(took_s=0)
    assert not node.state.may_acquire(node.now)
    node.clock.advance(0.001)
    assert node.state.may_acquire(node.now)


def test_results_for_a_lease_that_is_no_longer_current_are_ignored() -> None:
    node = Node()
    node.join()
    node.holding(1)
    stale = node.state
    assert node.send(LeaseGone(OTHER_LEASE, "not ours")) == ()
    assert node.send(Acquired(OTHER_LEASE, 9, 900)) == ()
    assert node.send(Settled(OTHER_LEASE, Plan(release={1: 101}))) == ()
    assert node.state == stale
    sent = node.now
    node.send(LeaseGone(LEASE, "gone"))
    node.clock.advance(0.1)
    actions = node.send(Renewed(LEASE, sent, int(TTL)))  # the keepalive that was in flight
    assert node.state.lease == 0
    assert node.state.renewed_at == NEVER
    assert actions == (Wait(node.now),)
    assert node.send(Acquired(LEASE, 9, 900)) == ()
    assert node.state.held == {}


def test_a_lease_lost_twice_is_dropped_once() -> None:
    node = Node()
    node.join()
    node.send(LeaseGone(LEASE, "first"))
    assert node.send(LeaseGone(LEASE, "again")) == ()
    assert node.actions(Say).count("lapse") == 1


# -- stepping down and sitting out -----------------------------------------------------------------


def test_an_unhealthy_node_renews_nothing_and_lets_its_claims_lapse() -> None:
    node = Node()
    node.join()
    node.holding(1)
    actions = node.send(Beat(healthy=False, revision=40))
    assert actions[0] == Say(
        logging.WARNING,
        "unhealthy: not renewing the lease, so that other nodes take the shards",
        "step_down",
        {"shards": 1},
    )
    assert actions[1:] == (Wait(node.now + BEAT),)
    assert node.state.trouble_revision == 40
    node.clock.advance(BEAT)
    node.send(Beat(healthy=False, revision=45))
    assert node.state.trouble_revision == 40, "the revision when the trouble began"
    assert node.state.unhealthy_at == node.now
    node.clock.advance(TTL)
    assert says(node.send(Beat(healthy=False, revision=50))) == [], "not claiming: nothing to say"
    assert node.state.owned(node.now) == {}


def test_healthy_again_within_the_ttl_the_node_renews_the_same_lease() -> None:
    node = Node()
    node.join()
    node.holding(1)
    node.send(Beat(healthy=False, revision=40))
    node.clock.advance(BEAT)
    node.renew()
    assert node.state.lease == LEASE
    assert node.state.trouble_revision is None
    assert set(node.state.owned(node.now)) == {1}


def stepped_down(others: dict[str, int]) -> Node:
    """A node that was unhealthy from revision 40 until its lease was found gone (ttl 0)."""
    node = Node()
    node.join()
    node.send(Beat(healthy=False, revision=40, schedulers=others))
    node.clock.advance(TTL)
    node.send(Beat(healthy=False, revision=41, schedulers=others))
    node.clock.advance(BEAT)
    node.renew(ttl=0)
    assert node.state.lease == 0
    return node


def test_after_a_step_down_the_node_sits_out_while_earlier_members_serve() -> None:
    others = {"n2": 12, "n3": 30}  # members since before the trouble (revision 40)
    node = stepped_down(others)
    last_unhealthy = node.state.unhealthy_at
    actions = node.send(Beat(healthy=True, revision=60, schedulers=others))
    assert actions == (
        Say(
            logging.INFO,
            "sitting out before rejoining: other schedulers serve meanwhile",
            "sit_out",
            {"hold_s": HOLD, "others": 2},
        ),
        Wait(node.now + BEAT),
    )
    node.clock.advance(last_unhealthy + HOLD - node.now - 0.001)
    assert node.send(Beat(healthy=True, revision=70, schedulers=others)) == (Wait(node.now + BEAT),)
    assert node.actions(Say).count("sit_out") == 1, "said once"
    node.clock.advance(0.001)
    assert node.send(Beat(healthy=True, revision=70, schedulers=others)) == (Join(),)
    assert not node.state.sitting_out


def test_members_that_joined_after_the_trouble_began_do_not_keep_a_node_out() -> None:
    """They had the same trouble (everyone's store was down), so nobody serves meanwhile."""
    node = stepped_down({"n2": 41})
    assert node.send(Beat(healthy=True, revision=60, schedulers={"n2": 41, "n3": 55})) == (Join(),)


def test_a_lone_node_that_stepped_down_joins_at_once() -> None:
    node = stepped_down({})
    assert node.send(Beat(healthy=True, revision=60)) == (Join(),)


def test_an_unhealthy_beat_while_sitting_out_restarts_the_hold() -> None:
    others = {"n2": 1}
    node = stepped_down(others)
    node.send(Beat(healthy=True, revision=60, schedulers=others))
    node.clock.advance(HOLD - 1)
    node.send(Beat(healthy=False, revision=61, schedulers=others))
    node.clock.advance(HOLD - 1)
    assert isinstance(node.send(Beat(healthy=True, revision=62, schedulers=others))[-1], Wait)


# -- outages -----------------------------------------------------------------------------------


def test_an_unreachable_etcd_is_retried_with_backoff_and_its_return_reopens_the_watch() -> None:
    node = Node()
    node.join()
    assert node.send(Beat(healthy=True)) == (Renew(LEASE),)
    assert node.send(Unreachable()) == (RetryLater(),)
    assert node.send(Beat(healthy=True)) == (Renew(LEASE),)
    assert node.send(Unreachable()) == (RetryLater(),)
    actions = node.renew()
    assert actions[:2] == (
        Say(logging.INFO, "etcd reachable again", "reconnect", {"backend": "etcd"}),
        RestartWatch(),
    )
    assert RestartWatch() not in node.renew(), "only after an outage"


def test_a_join_that_fails_is_retried() -> None:
    node = Node()
    assert node.send(Beat(healthy=True)) == (Join(),)
    assert node.send(Unreachable()) == (RetryLater(),)
    actions = node.join()
    assert RestartWatch() in actions
    assert node.state.lease == LEASE


# -- held shards ---------------------------------------------------------------------------------


def test_a_plan_settles_before_etcd_is_touched_releasing_dropping_and_adopting() -> None:
    node = Node()
    node.join()
    node.holding(1, 2, 3)
    plan = Plan(release={1: 101}, drop=(2,), adopt={8: 808}, acquire=(9,))
    assert node.send(Settled(LEASE, plan)) == (Notify(),)
    assert dict(node.state.held) == {3: 103, 8: 808}
    assert node.send(Settled(LEASE, Plan(acquire=(9,)))) == (), "nothing changed: no notification"
    assert node.send(Acquired(LEASE, 9, 909)) == (Notify(),)
    assert dict(node.state.held) == {3: 103, 8: 808, 9: 909}


def test_stopping_gives_up_every_claim() -> None:
    node = Node()
    node.join()
    node.holding(1)
    assert node.send(Stopped()) == (Notify(),)
    assert node.state.lease == 0
    assert node.state.owned(node.now) == {}
    assert node.state.held == {}


# -- every interleaving, up to a depth -------------------------------------------------------------


@dataclass(frozen=True)
class World:
    """A session and the etcd it talks to, as the exploration below plays it: ``sends`` holds,
    for each lease etcd keeps, the send time of its last successful grant or keepalive (etcd
    received it then at the earliest, so the lease lives at least until ``sends + TTL``)."""

    state: Session
    now: float
    pace: Action
    sends: dict[int, float]
    others: dict[str, int]
    deadline: float | None = None  # the armed Lapsed timer
    lost_at: float = NEVER
    revision: int = 10
    next_lease: int = 1


def check(world: World) -> None:
    """What must hold at every instant."""
    state, now = world.state, world.now
    if state.owned(now):
        assert state.lease in world.sends, "claims under a lease etcd does not keep"
        assert now < world.sends[state.lease] + TTL - MARGIN, "claims past the earliest expiry - margin"
    if not state.lease:
        assert not state.held
    if state.may_acquire(now):
        assert now >= world.lost_at + TTL, "acquires within a TTL of a lost lease"


def claims(state: Session, now: float) -> dict[int, int]:
    return {shard: lease.epoch for shard, lease in state.owned(now).items()}


def feed(world: World, event: SessionEvent) -> World:
    state, now = world.state, world.now
    before = claims(state, now)
    after, actions = next_step(state, now, event)
    paces = [action for action in actions if isinstance(action, PACING)]
    answers = isinstance(event, Beat | Joined | Renewed | Unreachable)
    assert len(paces) == (1 if answers else 0), (event, actions)
    if isinstance(event, Beat) and not event.healthy:
        assert isinstance(paces[0], Wait), "an unhealthy node renews nothing"
    if paces and isinstance(paces[0], Wait):
        assert now <= paces[0].until <= now + BEAT
    if paces and isinstance(paces[0], Join):
        serving = [n for n, created in world.others.items() if created <= (state.trouble_revision or 0)]
        assert not (serving and now < state.unhealthy_at + HOLD), "joins while it should sit out"
    if claims(after, now) != before:
        assert Notify() in actions, "claims changed silently"
    deadline = world.deadline
    for action in actions:
        if isinstance(action, ArmDeadline):
            deadline = action.at
    lost_at = now if isinstance(event, LeaseGone) and state.lease == event.lease else world.lost_at
    if isinstance(event, Renewed) and event.ttl <= 0 and state.lease == event.lease:
        lost_at = now
    pace = paces[0] if paces else world.pace
    moved = World(
        after, now, pace, world.sends, world.others, deadline, lost_at, world.revision + 1, world.next_lease
    )
    check(moved)
    return moved


def replace_world(world: World, **changes: object) -> World:
    return replace(world, **changes)  # type: ignore[arg-type]


def advance(world: World, to: float) -> World:
    """Time passes until ``to``; the deadline timer fires on the way if it is due."""
    while world.deadline is not None and world.deadline <= to:
        at = world.deadline
        check(replace_world(world, now=max(world.now, at - 1e-9)))
        world = feed(replace_world(world, now=max(world.now, at), deadline=None), Lapsed())
    world = replace_world(world, now=max(world.now, to))
    check(world)
    return world


def beat(world: World, healthy: bool) -> World:
    return feed(world, Beat(healthy, world.revision, world.others))


def successors(world: World) -> list[World]:
    pace, now, lease = world.pace, world.now, world.state.lease
    found: list[World] = []
    if isinstance(pace, Wait):
        found += [beat(advance(world, pace.until), True), beat(advance(world, pace.until), False)]
        middle = advance(world, (now + pace.until) / 2)
        if lease:
            lost = feed(middle, LeaseGone(lease, "etcd lost it"))
            found.append(beat(replace_world(lost, sends=_without(lost.sends, lease)), True))
            found.append(feed(middle, Acquired(lease, middle.revision % 8, middle.revision)))
    elif isinstance(pace, RetryLater):
        found += [beat(advance(world, now + 0.4), True), beat(advance(world, now + 0.4), False)]
    elif isinstance(pace, Join):
        new = world.next_lease
        for took in (0.1, TTL):
            answered = replace_world(advance(world, now + took), next_lease=new + 1)
            answered = replace_world(answered, sends={**answered.sends, new: now})
            found.append(feed(answered, Joined(new, now)))
        found.append(feed(advance(world, now + 0.5), Unreachable()))
    elif isinstance(pace, Renew):
        alive = pace.lease in world.sends
        for took in (0.1, TTL - MARGIN + 0.3):
            answered = advance(world, now + took)
            if alive:
                answered = replace_world(answered, sends={**answered.sends, pace.lease: now})
            found.append(feed(answered, Renewed(pace.lease, now, int(TTL) if alive else 0)))
        gone = replace_world(advance(world, now + 0.1), sends=_without(world.sends, pace.lease))
        found.append(feed(gone, Renewed(pace.lease, now, 0)))
        found.append(feed(advance(world, now + 0.5), Unreachable()))
    return found


def _without(sends: dict[int, float], lease: int) -> dict[int, float]:
    return {key: value for key, value in sends.items() if key != lease}


def explore(world: World, depth: int) -> int:
    if not depth:
        return 1
    return sum(explore(next_world, depth - 1) for next_world in successors(world))


@pytest.mark.parametrize("others", [{}, {"n2": 5}], ids=["alone", "with-a-serving-scheduler"])
def test_every_interleaving_keeps_claims_within_the_lease(others: dict[str, int]) -> None:
    """Every sequence of 9 steps (heartbeats healthy or not, answers fast, slow, refused or
    lost, leases lost in between, acquisitions, the deadline timer) keeps the invariants of
    ``check`` and ``feed``: claims only under a lease etcd keeps and before its earliest expiry
    minus the margin, nothing acquired within a TTL of a lost lease, no renewal while unhealthy,
    no join while sitting out, and a notification whenever the claims change."""
    start = World(Session(Terms(TTL, MARGIN, HOLD)), 500.0, Wait(500.0), {}, others)
    paths = explore(start, 9)
    assert paths > 10_000
