"""The etcd coordinator's pure decisions: rendezvous assignment and the reconcile plan."""

from __future__ import annotations

from cronwheel.coordinator.plan import (
    ShardKey,
    View,
    decide,
    decode_assignment,
    encode_assignment,
    rendezvous,
)

SHARDS = 256
ME, LEASE = "n1", 111


def test_rendezvous_is_stable_and_covers_every_shard() -> None:
    owners = rendezvous(SHARDS, ["n1", "n2", "n3"])
    assert owners == rendezvous(SHARDS, ["n3", "n1", "n2", "n1"])
    assert len(owners) == SHARDS
    assert set(owners) == {"n1", "n2", "n3"}
    assert all(60 < owners.count(node) < 110 for node in ("n1", "n2", "n3"))


def test_rendezvous_moves_only_the_shards_of_the_node_that_joins_or_leaves() -> None:
    three = rendezvous(SHARDS, ["n1", "n2", "n3"])
    four = rendezvous(SHARDS, ["n1", "n2", "n3", "n4"])
    moved = [shard for shard in range(SHARDS) if three[shard] != four[shard]]
    assert all(four[shard] == "n4" for shard in moved)
    assert 0.15 * SHARDS < len(moved) < 0.35 * SHARDS
    two = rendezvous(SHARDS, ["n1", "n2"])
    assert all(two[shard] == three[shard] for shard in range(SHARDS) if three[shard] != "n3")


def test_rendezvous_of_nobody_assigns_nothing() -> None:
    assert rendezvous(4, []) == (None, None, None, None)


def test_assignments_round_trip_and_garbage_is_none() -> None:
    owners = ("n1", None, "n2")
    assert decode_assignment(encode_assignment(owners)) == owners
    assert decode_assignment(b"not json") is None
    assert decode_assignment(b'{"owners": [1, 2]}') is None


def view(**overrides: object) -> View:
    base: dict[str, object] = {"revision": 100, "members": {ME: ("scheduler",), "n2": ("scheduler",)}}
    base.update(overrides)
    return View(**base)  # type: ignore[arg-type]


def test_without_a_leader_schedulers_campaign_and_others_do_not() -> None:
    assert decide(ME, ("scheduler",), LEASE, view(), {}, 4).campaign
    assert not decide(ME, ("api",), LEASE, view(), {}, 4).campaign
    assert not decide(ME, ("scheduler",), LEASE, view(leader="n2", leader_lease=5), {}, 4).campaign


def test_without_a_watchdog_every_member_campaigns_for_it_whatever_its_roles() -> None:
    members = {ME: (), "n2": ("scheduler",)}
    for roles in (("api",), ("worker",), ("scheduler",), ("api", "scheduler", "worker")):
        plan = decide(ME, roles, LEASE, view(members={**members, ME: roles}), {}, 4)
        assert plan.watch, roles
        assert plan, "a plan that only campaigns is carried out"
    held = view(members={**members, ME: ("api",)}, watchdog="n2", watchdog_lease=5)
    assert not decide(ME, ("api",), LEASE, held, {}, 4).watch


def test_a_node_that_is_not_a_member_yet_does_not_campaign_for_the_watchdog() -> None:
    assert not decide(ME, ("api",), LEASE, view(members={"n2": ("scheduler",)}), {}, 4).watch
    assert not decide(ME, ("api",), 0, view(), {}, 4).watch  # no lease: nothing to attach it to


def test_a_node_that_cannot_watch_neither_campaigns_nor_keeps_the_duty() -> None:
    nobody = view()
    unable = decide(ME, ("worker",), LEASE, nobody, {}, 4, may_watch=False)
    assert not unable.watch
    assert not unable.resign  # nothing of its own to give up
    mine = view(watchdog=ME, watchdog_lease=LEASE)
    assert decide(ME, ("worker",), LEASE, mine, {}, 4, may_watch=False).resign
    assert not decide(ME, ("worker",), LEASE, mine, {}, 4).resign  # able: it keeps the duty
    old = view(watchdog=ME, watchdog_lease=999)  # an older incarnation's key: it expires alone
    assert not decide(ME, ("worker",), LEASE, old, {}, 4, may_watch=False).resign


def test_the_watchdog_and_the_leader_are_separate_duties() -> None:
    plan = decide(ME, ("api",), LEASE, view(members={ME: ("api",)}, leader="n2", leader_lease=5), {}, 4)
    assert plan.watch
    assert not plan.campaign
    both = view(leader="n2", leader_lease=5, watchdog="n3", watchdog_lease=6)
    assert (both.holder("leader"), both.holder("watchdog")) == (("n2", 5), ("n3", 6))


def test_the_leader_publishes_rendezvous_over_live_schedulers_only_when_it_differs() -> None:
    members = {ME: ("scheduler",), "n2": ("scheduler",), "api": ("api",)}
    wanted = rendezvous(8, [ME, "n2"])
    plan = decide(ME, ("scheduler",), LEASE, view(members=members, leader=ME, leader_lease=LEASE), {}, 8)
    assert plan.assignment == wanted
    same = view(members=members, leader=ME, leader_lease=LEASE, assignment=wanted)
    assert decide(ME, ("scheduler",), LEASE, same, {}, 8).assignment is None
    follower = view(members=members, leader="n2", leader_lease=5)
    assert decide(ME, ("scheduler",), LEASE, follower, {}, 8).assignment is None


def test_a_node_acquires_its_free_shards_and_waits_for_taken_ones() -> None:
    assignment = (ME, ME, "n2", ME)
    taken = {1: ShardKey("n2", 5, 90)}
    plan = decide(ME, ("scheduler",), LEASE, view(assignment=assignment, shards=taken), {}, 4)
    assert plan.acquire == (0, 3)
    assert not plan.release


def test_a_node_releases_what_is_no_longer_assigned_to_it() -> None:
    assignment = ("n2", ME, "n2", ME)
    keys = {0: ShardKey(ME, LEASE, 50), 1: ShardKey(ME, LEASE, 51)}
    held = {0: 50, 1: 51, 2: 99}  # shard 2 is held but its key is not in the view
    plan = decide(ME, ("scheduler",), LEASE, view(assignment=assignment, shards=keys), held, 4)
    assert dict(plan.release) == {0: 50, 2: 99}
    assert plan.acquire == (3,)


def test_held_shards_not_yet_in_the_view_are_kept() -> None:
    assignment = (ME, ME, ME, ME)
    plan = decide(ME, ("scheduler",), LEASE, view(revision=100, assignment=assignment), {0: 101}, 4)
    assert 0 not in plan.drop
    assert 0 not in plan.acquire


def test_held_shards_whose_key_is_gone_are_dropped() -> None:
    assignment = (ME, ME, ME, ME)
    other = {1: ShardKey("n2", 5, 95)}
    plan = decide(ME, ("scheduler",), LEASE, view(assignment=assignment, shards=other), {0: 90, 1: 80}, 4)
    assert set(plan.drop) == {0, 1}


def test_keys_of_ours_that_are_not_held_are_adopted() -> None:
    assignment = (ME, ME, ME, ME)
    keys = {2: ShardKey(ME, LEASE, 77), 3: ShardKey(ME, 999, 78)}  # 3: an older incarnation's lease
    plan = decide(ME, ("scheduler",), LEASE, view(assignment=assignment, shards=keys), {}, 4)
    assert dict(plan.adopt) == {2: 77}
    assert plan.acquire == (0, 1)


def test_without_a_lease_everything_is_dropped() -> None:
    plan = decide(ME, ("scheduler",), 0, view(), {1: 5, 2: 6}, 4)
    assert set(plan.drop) == {1, 2}
    assert not plan.campaign
    assert not plan.acquire


def test_a_node_missing_from_the_members_owns_nothing() -> None:
    plan = decide(
        ME, ("scheduler",), LEASE, view(members={"n2": ("scheduler",)}, assignment=(ME,) * 4), {}, 4
    )
    assert plan.acquire == ()
    assert not plan.campaign
